package chaostest

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Totals adds up the paths.
type Totals struct {
	Faults                   int
	Ops, Acked, Failed, Hung int64
	Verified                 int64
	Lost, Corrupt            int
	MaxStall                 time.Duration
}

// Totals returns the run's totals over every path and fault kind.
func (r *Result) Totals() Totals {
	var t Totals
	for _, n := range r.Faults {
		t.Faults += n
	}
	for _, p := range r.Paths {
		t.Ops += p.Issued
		t.Acked += p.Acked
		t.Failed += p.Failed
		t.Hung += p.Hung
		t.Verified += p.Verified
		t.Lost += p.Lost
		t.Corrupt += p.Corrupt
		t.MaxStall = max(t.MaxStall, p.MaxStall)
	}
	return t
}

// OK reports whether nothing was lost or corrupted.
func (r *Result) OK() bool {
	t := r.Totals()
	return t.Lost == 0 && t.Corrupt == 0
}

// Summary is the run's last line.
func (r *Result) Summary() string {
	t := r.Totals()
	return fmt.Sprintf("chaos: %d faults, %d ops, %d acked, %d lost, %d corrupt, max stall %.1f s",
		t.Faults, t.Ops, t.Acked, t.Lost, t.Corrupt, t.MaxStall.Seconds())
}

// WriteTable prints the faults by kind, the operations by path, what
// failed and why, the findings, and Summary as the last line.
func (r *Result) WriteTable(w io.Writer) {
	t := r.Totals()
	fmt.Fprintf(w, "\nchaos run: seed %d, %v\n\n", r.Seed, r.Duration.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\tinjected\t")
	for _, k := range faultKinds(r.Faults) {
		fmt.Fprintf(tw, "%s\t%d\t\n", k, r.Faults[k])
	}
	fmt.Fprintf(tw, "total\t%d\t\n", t.Faults)
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\timage\tissued\tacked\tfailed\thung\tlost\tcorrupt\tblocks verified\tlongest stall\t")
	for _, p := range r.Paths {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f s\t\n", p.Path, p.Image, p.Issued, p.Acked,
			p.Failed, p.Hung, p.Lost, p.Corrupt, p.Verified, p.MaxStall.Seconds())
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f s\t\n", t.Ops, t.Acked, t.Failed, t.Hung,
		t.Lost, t.Corrupt, t.Verified, t.MaxStall.Seconds())
	tw.Flush()
	fmt.Fprintln(w)
	for _, p := range r.Paths {
		if p.Slowest != "" {
			fmt.Fprintf(w, "slowest on %s: %s\n", p.Path, p.Slowest)
		}
	}
	for _, p := range r.Paths {
		if p.Path == PathNBD {
			fmt.Fprintf(w, "nbd client: %d connections made, %d requests retried on a new connection\n", p.Reconnects, p.Retries)
		}
	}
	for _, p := range r.Paths {
		if len(p.Errors) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nfailed operations on the %s path, by error:\n", p.Path)
		type kv struct {
			msg string
			n   int
		}
		var errs []kv
		for m, n := range p.Errors {
			errs = append(errs, kv{m, n})
		}
		sort.Slice(errs, func(i, j int) bool {
			return errs[i].n > errs[j].n || errs[i].n == errs[j].n && errs[i].msg < errs[j].msg
		})
		for i, e := range errs {
			if i == 8 {
				fmt.Fprintf(w, "  ... and %d other errors\n", len(errs)-i)
				break
			}
			fmt.Fprintf(w, "  %6d  %s\n", e.n, e.msg)
		}
	}
	section := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", strings.TrimSpace(l))
		}
	}
	section("faults not injected or healed as planned", r.FaultErrors)
	section("problems with the run", r.Problems)
	section("LOST OR CORRUPT", r.Findings)
	fmt.Fprintln(w)
	fmt.Fprintln(w, r.Summary())
}

// faultKinds lists the kinds in AllFaults order, then any other.
func faultKinds(m map[string]int) []string {
	var out []string
	for _, k := range AllFaults {
		if _, ok := m[k]; ok {
			out = append(out, k)
		}
	}
	for k := range m {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}
