package bench

import (
	"bytes"
	"fmt"
	"math"
	"strings"
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
		{label: "rbd bench CLI 4K randwrite t16", section: "rbd-cli", cas: "4K rand write t16", target: 1.0},
		{label: "rbd bench CLI 4K randread t16", section: "rbd-cli", cas: "4K rand read t16", target: 1.0},
		{label: "rbd bench CLI 4M write t16", section: "rbd-cli", cas: "4M seq write t16", target: 1.0},
		{label: "rbd bench CLI 4M read t16", section: "rbd-cli", cas: "4M seq read t16", target: 1.0},
		{label: "nbd-rbd 4K randwrite QD32 vs qemu-nbd", section: "rbd-nbd", cas: "4k randwrite QD32", target: 1.5},
		{label: "nbd-rbd 4K randread QD32 vs qemu-nbd", section: "rbd-nbd", cas: "4k randread QD32", target: 1.5},
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

// caseMatches tells whether a case named name is the one a headline row
// names cas: the same name, or cas followed by a parenthesised detail
// such as the amount of I/O, which may change without renaming the row.
func caseMatches(name, cas string) bool {
	return name == cas || strings.HasPrefix(name, cas+" (")
}

// findCase returns the case named cas in the section with id, and that
// section; nil when the run did not measure it.
func (r *Report) findCase(id, cas string) (*Section, *Case) {
	for _, sec := range r.Sections {
		if sec.ID != id || sec.Skipped != "" || len(sec.Contenders) < 2 {
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
	b.WriteString("## Headline: purerbd against its peer, same run\n\n" +
		"Medians of the interleaved repetitions; ratio = median purerbd / median peer (for CPU per op and " +
		"sizes, lower is better and the target is a ceiling). Details, spread and latencies in the sections below.\n\n" +
		"| comparison | purerbd | peer | ratio | target |\n|---|---|---|---|---|\n")
	for _, h := range headlineRows() {
		sec, c := r.findCase(h.section, h.cas)
		if c == nil {
			fmt.Fprintf(b, "| %s | not measured | – | – | %s |\n", h.label, targetCell(h, math.NaN()))
			continue
		}
		a, p := sec.Contenders[0], sec.Contenders[1]
		var va, vp float64
		unit := c.Unit
		if h.cpu {
			va, vp, unit = cpuPerOp(c, a), cpuPerOp(c, p), "CPU s/Mop"
		} else {
			va, vp = c.spread(a).Median, c.spread(p).Median
		}
		rt := ratio(va, vp)
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", h.label, valueCell(va, unit),
			valueCell(vp, unit)+" ("+p+")", ratioText(rt, h.target), targetCell(h, rt))
	}
	if r.KernelVM != nil {
		if v := r.KernelVM.rssAt(vmNodeVolumes); v > 0 {
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
	b.WriteString("\n")
}

// cpuPerOp is the median CPU seconds per million operations.
func cpuPerOp(c *Case, who string) float64 {
	return spreadOf(c.values(who, Sample.CPUPerMop)).Median
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
	met := r >= h.target
	if h.cpu {
		t, met = fmt.Sprintf("≤ %.1f×", h.target), r <= h.target
	}
	if math.IsNaN(r) {
		return t
	}
	return t + ": " + metCell(met)
}

func metCell(met bool) string {
	if met {
		return "met"
	}
	return "**not met**"
}
