package bench

import (
	"bytes"
	"fmt"
	"math"
	"strings"
)

// ceilingPath is one of purerbd's device paths as the ceiling table
// reads it: the section of the path on Ceph and the ways its crossing
// alone was measured.
type ceilingPath struct {
	name   string  // "nbd.ko"
	target float64 // the path's target against krbd
	device *Section
	// crossing gives the crossing alone of the case named, in krbd's
	// latencies of its own group (NaN when not measured).
	crossing func(name string) float64
}

// writeCeilings sets, for the 4K cases run at queue depth 1, what the
// parts of a device path take one after the other beside what the path
// took. At depth 1 a request served from userspace crosses into the
// server, waits for the client's trip to the OSD and crosses back, one
// after the other: its latency is at least the crossing alone (a memory
// disk through the same kernel path) plus the client alone (the rbd
// package with no device), and its rate at most krbd's latency over that
// sum. Each part is taken against the krbd runs of its own group, so
// that the groups' drift does not enter. A ceiling under the target says
// that no server through that path reaches the target in this guest
// unless the crossing or the client alone gets faster.
func (k *KernelVM) writeCeilings(b *bytes.Buffer) {
	client := k.section("vm-rbd-client")
	if !measuredSection(client) {
		return
	}
	var paths []ceilingPath
	if s := k.section("vm-rbd"); measuredSection(s) {
		floor, mem := k.section("vm-floor-nbd"), k.section("vm-memory")
		paths = append(paths, ceilingPath{name: "nbd.ko", target: nbdKRBDTarget, device: s, crossing: func(name string) float64 {
			// nbdkit's memory disk against krbd; purerbd's own, measured
			// beside nbdkit's in the memory group, where it is faster
			nbdkit := partOfKRBD(floor, name, "nbdkit")
			if measuredSection(mem) {
				c := caseNamed(mem, name)
				return nanMin(nbdkit, nbdkit*meanLatUs(c, "purerbd")/meanLatUs(c, "nbdkit"))
			}
			return nbdkit
		}})
	}
	if s := k.section("vm-rbd-ublk"); measuredSection(s) {
		floor := k.section("vm-floor-ublk")
		paths = append(paths, ceilingPath{name: "ublk", target: ublkKRBDTarget, device: s, crossing: func(name string) float64 {
			return partOfKRBD(floor, name, "purerbd")
		}})
	}
	var rows []string
	for _, p := range paths {
		for _, c := range p.device.Cases {
			if !strings.HasPrefix(c.Name, "4k ") || !strings.HasSuffix(c.Name, " QD1") {
				continue
			}
			alone, crossing := partOfKRBD(client, c.Name, client.Contenders[0]), p.crossing(c.Name)
			sum := alone + crossing
			if math.IsNaN(sum) {
				continue
			}
			ceiling := 1 / sum
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |", p.name, c.Name,
				ratioText(alone, 0), ratioText(crossing, 0), ratioText(sum, 0),
				ratioText(partOfKRBD(p.device, c.Name, p.device.Contenders[0]), 0),
				ratioText(ceiling, p.target), ratioText(c.Ratio(p.device.Contenders[0], "krbd"), p.target),
				ceilingVerdict(ceiling, p.target)))
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("### At queue depth 1 the parts add up: each path's ceiling\n\n")
	fmt.Fprintf(b, "At depth 1 a request served from userspace crosses into the server, waits for the client's trip "+
		"to the OSD and crosses back, one after the other. So its mean latency is at least that of the crossing alone "+
		"(a memory disk served through the same kernel path: its server does next to nothing and never waits; for "+
		"nbd.ko the faster of nbdkit's and purerbd's) plus that of the client alone (purerbd's rbd package with no "+
		"device), and its rate against krbd at most 1 over that sum: the ceiling. Each latency is the median over "+
		"runs of each run's mean, taken as a multiple of krbd's in the same group, so that the groups' drift does "+
		"not enter. Targets: nbd.ko ≥ %.2f× krbd, ublk ≥ %.2f× krbd. A ceiling under its target means no server "+
		"behind that path reaches the target in this guest unless the crossing itself or the client alone gets "+
		"faster; the path's own latency above the sum is what the parts cost more together than apart. 1 MiB "+
		"requests are left out: there the memory disk's copy of the megabyte and the client's are the same work "+
		"counted twice.\n\n", nbdKRBDTarget, ublkKRBDTarget)
	b.WriteString("| path | case | client alone (latency × krbd's) | crossing alone | sum | the path on Ceph | " +
		"ceiling (1 / sum) | measured rate / krbd | against the target |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	b.WriteString("\n")
}

// measuredSection reports whether sec is there and was not skipped.
func measuredSection(sec *Section) bool { return sec != nil && sec.Skipped == "" }

// partOfKRBD is contender's mean latency in sec's case called name over
// krbd's in the same case (NaN when either is missing).
func partOfKRBD(sec *Section, name, contender string) float64 {
	if !measuredSection(sec) {
		return math.NaN()
	}
	c := caseNamed(sec, name)
	return ratio(meanLatUs(c, contender), meanLatUs(c, "krbd"))
}

// ceilingVerdict says whether a ceiling leaves room for the target.
func ceilingVerdict(ceiling, target float64) string {
	if ceiling < target {
		return "**below the target**"
	}
	return "above the target"
}

// meanLatUs is the median over runs of contender's mean latency in µs,
// or NaN when c is nil or the runs have none.
func meanLatUs(c *Case, contender string) float64 {
	if c == nil {
		return math.NaN()
	}
	return spreadOf(c.values(contender, func(s Sample) float64 {
		if s.MeanLat > 0 {
			return s.MeanLat / 1e3
		}
		return math.NaN() // not measured: spreadOf leaves it out
	})).Median
}

// nanMin is the smaller of a and b, ignoring either when it is NaN.
func nanMin(a, b float64) float64 {
	switch {
	case math.IsNaN(a):
		return b
	case math.IsNaN(b):
		return a
	}
	return min(a, b)
}
