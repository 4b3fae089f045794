package bench

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// headlineRow is one line of the table the report starts with: a case of
// a section compared between purerbd (the section's first contender) and
// its peer (the second), against the target ratio.
type headlineRow struct {
	label   string  // "rbd 4K randwrite QD32"
	section string  // Section.ID
	cas     string  // Case.Name, or what it starts with before " (": "4K rand write t16" finds "4K rand write t16 (256M total)"
	target  float64 // ratio purerbd/peer to reach; 0: none set
	// cpu compares CPU per operation (lower is better) instead of the
	// headline value.
	cpu bool
	// osd compares the OSD's CPU per client operation (lower is better).
	osd bool
}

// headlineRows are the comparisons the report starts with, in order. The
// targets are those of issue #10 (ratios purerbd/peer, same run), and
// issue #5's for the rbd bench CLI pair.
func headlineRows() []headlineRow {
	return []headlineRow{
		{label: "rbd 4K randwrite QD32", section: "rbd-memstore", cas: "4k randwrite QD32", target: 1.2},
		{label: "rbd 4K randread QD32", section: "rbd-memstore", cas: "4k randread QD32", target: 1.2},
		{label: "rbd 4M write", section: "rbd-memstore", cas: "4M seq write QD16", target: 1.0},
		{label: "rbd 4M read", section: "rbd-memstore", cas: "4M seq read QD16", target: 1.0},
		{label: "rbd 4K randwrite QD32 client CPU/op", section: "rbd-memstore", cas: "4k randwrite QD32", target: 0.8, cpu: true},
		{label: "rbd 4K randread QD32 client CPU/op", section: "rbd-memstore", cas: "4k randread QD32", target: 0.8, cpu: true},
		{label: "rbd 4K randwrite QD32 OSD CPU/op", section: "rbd-memstore", cas: "4k randwrite QD32", osd: true},
		{label: "rbd 4K randread QD32 OSD CPU/op", section: "rbd-memstore", cas: "4k randread QD32", osd: true},
		{label: "rbd bench CLI 4K randwrite t16", section: "rbd-cli", cas: "4K rand write t16", target: 1.0},
		{label: "rbd bench CLI 4K randread t16", section: "rbd-cli", cas: "4K rand read t16", target: 1.0},
		{label: "rbd bench CLI 4M write t16", section: "rbd-cli", cas: "4M seq write t16", target: 1.0},
		{label: "rbd bench CLI 4M read t16", section: "rbd-cli", cas: "4M seq read t16", target: 1.0},
		{label: "rbd bench CLI 4K randwrite t16 OSD CPU/op", section: "rbd-cli", cas: "4K rand write t16", osd: true},
		{label: "nbd-rbd 4K randwrite QD32 vs qemu-nbd", section: "rbd-nbd", cas: "4k randwrite QD32", target: 1.5},
		{label: "nbd-rbd 4K randread QD32 vs qemu-nbd", section: "rbd-nbd", cas: "4k randread QD32", target: 1.5},
		{label: "nbd-rbd 4K randwrite QD32 OSD CPU/op", section: "rbd-nbd", cas: "4k randwrite QD32", osd: true},
		{label: "nbd-memory 4K randread QD32 vs nbdkit", section: "nbd-memory", cas: "4k randread QD32", target: 1.2},
		{label: "nbd-memory 4K randwrite QD32 vs nbdkit", section: "nbd-memory", cas: "4k randwrite QD32", target: 1.2},
		{label: "rados 4K write QD32 vs rados bench", section: "rados", cas: "4K write QD32"},
		{label: "rados 4K randread QD32 vs rados bench", section: "rados", cas: "4K rand read QD32"},
		{label: "rados 4M write QD16 vs rados bench", section: "rados", cas: "4M write QD16"},
		{label: "rados 4M randread QD16 vs rados bench", section: "rados", cas: "4M rand read QD16"},
		{label: "rbd 4K randwrite QD32 on bluestore", section: "rbd-bluestore", cas: "4k randwrite QD32"},
	}
}

// Footprint targets of issue #10.
const (
	nodeRSSTarget   = 64 << 20 // node plugin RSS with 10 volumes attached
	imageSizeTarget = 40e6     // controller image, decimal MB
)

// createSnapshotTarget is issue #30's target for CSI CreateSnapshot, a
// fifth of ceph-csi's time on the same kind of cluster as the issue
// states it (ceph-csi cannot be installed here to measure it again).
const (
	createSnapshotTarget     = 80 * time.Millisecond
	createSnapshotTargetText = "≤ 80 ms (0.2× ceph-csi's 408 ms)"
)

// caseMatches tells whether a case named name is the one a headline row
// names cas: the same name, or cas followed by a parenthesised detail
// such as the amount of I/O, which may change without renaming the row.
func caseMatches(name, cas string) bool {
	return name == cas || strings.HasPrefix(name, cas+" (")
}

// findCase returns the case named cas in the section with id, and that
// section; nil when the run did not measure it.
func (r *Report) findCase(id, cas string) (*Section, *Case) {
	return r.findCaseOn(id, cas, "")
}

// findCaseOn is findCase on the sections of one cluster kind ("reef
// untuned"; "" for any), id being the section's ID without the kind's
// suffix.
func (r *Report) findCaseOn(id, cas, kind string) (*Section, *Case) {
	for _, sec := range r.Sections {
		if sec.baseID() != id || (kind != "" && sec.Cluster != kind) || sec.Skipped != "" || len(sec.Contenders) < 2 {
			continue
		}
		for _, c := range sec.Cases {
			if caseMatches(c.Name, cas) {
				return sec, c
			}
		}
	}
	return nil, nil
}

// writeHeadline is the table the report starts with: every row is
// computed from this run's samples (ratio of medians), with the target
// and whether it is met.
func (r *Report) writeHeadline(b *bytes.Buffer) {
	// the usual table only for the usual cluster, so that a run on
	// another one says which it is
	if len(r.Kinds) > 1 || (len(r.Kinds) == 1 && r.Kinds[0] != clusterKind{ReleasePacific, Tuned}.label()) {
		r.writeHeadlineKinds(b)
		return
	}
	b.WriteString("## Headline: purerbd against its peer, same run\n\n" +
		"Medians of the interleaved repetitions; ratio = median purerbd / median peer (for CPU per op and " +
		"sizes, lower is better and the target is a ceiling). Details, spread and latencies in the sections below.\n\n" +
		"| comparison | purerbd | peer | ratio | target |\n|---|---|---|---|---|\n")
	for _, h := range headlineRows() {
		r.writeHeadlineRow(b, h)
	}
	r.writeOnceRows(b)
	b.WriteString("\n")
}

// writeHeadlineRow is row h of the table with one cluster's columns
// (purerbd, peer, ratio, target), from the first section that has it.
func (r *Report) writeHeadlineRow(b *bytes.Buffer, h headlineRow) {
	sec, c := r.findCase(h.section, h.cas)
	if c == nil {
		fmt.Fprintf(b, "| %s | not measured | – | – | %s |\n", h.label, targetCell(h, math.NaN()))
		return
	}
	a, p := sec.Contenders[0], sec.Contenders[1]
	metric, unit := h.metric(c)
	va, vp := spreadOf(c.values(a, metric)).Median, spreadOf(c.values(p, metric)).Median
	rt := ratio(va, vp)
	fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", h.label, valueCell(va, unit),
		valueCell(vp, unit)+" ("+p+")", ratioText(rt, h.target), targetCell(h, rt))
}

// writeOnceRows are the rows that no peer or cluster kind varies: the
// node plugin's RSS (kernel VM), the controller image's size and the
// CSI CreateSnapshot time, each against its target.
func (r *Report) writeOnceRows(b *bytes.Buffer) {
	if k := r.kernelVM(); k != nil {
		if v := k.rssAt(vmNodeVolumes); v > 0 {
			fmt.Fprintf(b, "| node plugin RSS, 10 volumes attached (VM) | %s | – | – | ≤ 64 MiB: %s |\n",
				bytesCell(v), metCell(float64(v) <= nodeRSSTarget))
		} else {
			fmt.Fprintf(b, "| node plugin RSS, 10 volumes attached (VM) | not measured | – | – | ≤ 64 MiB |\n")
		}
	}
	if f := r.Footprint; f != nil {
		if f.ImageSize > 0 {
			fmt.Fprintf(b, "| controller image (deploy/Dockerfile) | %.1f MB | – | – | ≤ 40 MB: %s |\n",
				float64(f.ImageSize)/1e6, metCell(float64(f.ImageSize) <= imageSizeTarget))
		} else {
			fmt.Fprintf(b, "| controller image (deploy/Dockerfile) | not built | – | – | ≤ 40 MB |\n")
		}
	}
	if cp := r.CSI; cp != nil && cp.Skipped == "" {
		for _, c := range cp.Calls {
			if c.Call != "CreateSnapshot" {
				continue
			}
			if len(c.Times) == 0 {
				fmt.Fprintf(b, "| CSI CreateSnapshot, median | not measured | – | – | %s |\n", createSnapshotTargetText)
				break
			}
			med := c.percentile(50)
			fmt.Fprintf(b, "| CSI CreateSnapshot, median of %d | %s ms | – | – | %s: %s |\n", len(c.Times),
				num(float64(med)/1e6), createSnapshotTargetText, metCell(med <= createSnapshotTarget))
		}
	}
}

// metric is what the row compares in a case's samples, and its unit.
func (h headlineRow) metric(c *Case) (func(Sample) float64, string) {
	switch {
	case h.cpu:
		return Sample.CPUPerMop, "CPU s/Mop"
	case h.osd:
		return Sample.OSDCPUPerMop, "OSD CPU s/Mop"
	}
	return func(s Sample) float64 { return s.Value }, c.Unit
}

// writeHeadlineKinds is the headline of a run on several cluster kinds:
// a column per release × tuning, each cell the ratio of medians with the
// two medians and their spreads (min–max over the repetitions).
func (r *Report) writeHeadlineKinds(b *bytes.Buffer) {
	b.WriteString("## Headline: purerbd against its peer, per Ceph release and cluster kind, same run\n\n" +
		"One column per cluster the run booted (release, tuned or untuned: see Machine), each against that " +
		"release's own peer (librbd's `rbd` and fio rbd engine, qemu-nbd). A cell is the ratio of medians " +
		"purerbd / peer, then purerbd's and the peer's medians with their spread (min–max) over the interleaved " +
		"repetitions; for CPU per op lower is better and the target is a ceiling.\n\n| comparison |")
	for _, k := range r.Kinds {
		b.WriteString(" " + k + " |")
	}
	b.WriteString(" target |\n|---|" + strings.Repeat("---|", len(r.Kinds)) + "---|\n")
	var once []headlineRow
	for _, h := range headlineRows() {
		if !strings.HasPrefix(h.section, "rbd") && h.section != "rados" {
			once = append(once, h) // the NBD memory export runs on no cluster
			continue
		}
		secs, cases := make([]*Section, len(r.Kinds)), make([]*Case, len(r.Kinds))
		for i, k := range r.Kinds {
			secs[i], cases[i] = r.findCaseOn(h.section, h.cas, k)
		}
		if !slices.ContainsFunc(cases, func(c *Case) bool { return c != nil }) {
			continue // a section no run selected (see Not measured)
		}
		fmt.Fprintf(b, "| %s |", h.label)
		var measured, met int
		var short []string
		for i, k := range r.Kinds {
			sec, c := secs[i], cases[i]
			if c == nil {
				b.WriteString(" not measured |")
				continue
			}
			a, p := sec.Contenders[0], sec.Contenders[1]
			metric, unit := h.metric(c)
			sa, sp := spreadOf(c.values(a, metric)), spreadOf(c.values(p, metric))
			rt := ratio(sa.Median, sp.Median)
			text := ratioText(rt, h.target)
			if h.target != 0 && !math.IsNaN(rt) {
				measured++
				if h.meets(rt) {
					met++
				} else {
					text = "**" + text + "**"
					short = append(short, k)
				}
			}
			fmt.Fprintf(b, " %s: %s / %s %s |", text, spreadCell(sa), spreadCell(sp), unit)
		}
		target := targetCell(h, math.NaN())
		if measured > 0 {
			target += fmt.Sprintf(": met on %d of %d", met, measured)
			if len(short) > 0 {
				target += " (**not** on " + strings.Join(short, ", ") + ")"
			}
		}
		fmt.Fprintf(b, " %s |\n", target)
	}
	b.WriteString("\n")
	b.WriteString("Measured once per run, on no cluster (the NBD memory export) or on the first cluster (the CSI " +
		"control plane):\n\n| comparison | purerbd | peer | ratio | target |\n|---|---|---|---|---|\n")
	for _, h := range once {
		r.writeHeadlineRow(b, h)
	}
	r.writeOnceRows(b)
	b.WriteString("\n")
}

// valueCell is a value with its unit ("4772 IOPS").
func valueCell(v float64, unit string) string {
	if math.IsNaN(v) {
		return "–"
	}
	return num(v) + " " + unit
}

// ratioText is a ratio with two decimals and a ×, or three where two
// would round it onto its target (0.998 is not 1.00 when the target is
// 1.0 and the table says "not met").
func ratioText(r, target float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "–"
	}
	if target != 0 && r != target && math.Abs(r-target) < 0.005 {
		return fmt.Sprintf("%.3f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

// targetCell gives the target and, once measured, whether it is met.
func targetCell(h headlineRow, r float64) string {
	if h.target == 0 {
		return "–"
	}
	t := fmt.Sprintf("≥ %.1f×", h.target)
	if h.cpu {
		t = fmt.Sprintf("≤ %.1f×", h.target)
	}
	if math.IsNaN(r) {
		return t
	}
	return t + ": " + metCell(h.meets(r))
}

// meets tells whether ratio r meets the row's target (a ceiling for CPU).
func (h headlineRow) meets(r float64) bool {
	if h.cpu {
		return r <= h.target
	}
	return r >= h.target
}

func metCell(met bool) string {
	if met {
		return "met"
	}
	return "**not met**"
}
