package bench

import (
	"bytes"
	"fmt"
	"math"
	"strings"
)

// ceilingPath is one of purerbd's device paths as the ceiling tables
// read it: the section of the path on Ceph and the ways its crossing
// alone was measured.
type ceilingPath struct {
	name   string  // "nbd.ko"
	target float64 // the path's target against krbd
	device *Section
	// crossing gives the crossing alone of the case named, by m, in
	// krbd's operations of its own group (NaN when not measured).
	crossing func(name string, m ceilingMeasure) float64
}

// ceilingMeasure is what a ceiling adds up: each part's cost per
// operation, as a multiple of krbd's time per operation in the part's
// own group, so that the groups' drift does not enter.
type ceilingMeasure struct {
	// cost is who's cost per operation in c; memory says the part is a
	// memory disk, which does no work on the cluster.
	cost func(c *Case, who string, memory bool) float64
	// krbd is krbd's time per operation in c, in cost's unit: a CPU cost
	// over it is the cores the part needs at krbd's rate.
	krbd func(c *Case) float64
	// text prints a part: a multiple of krbd's latency, or cores
	text func(v float64) string
}

// latencyMeasure: each part's mean latency against krbd's. At depth 1 a
// request's parts run one after the other.
func latencyMeasure() ceilingMeasure {
	return ceilingMeasure{
		cost: func(c *Case, who string, _ bool) float64 { return meanLatUs(c, who) },
		krbd: func(c *Case) float64 { return meanLatUs(c, "krbd") },
		text: func(v float64) string { return ratioText(v, 0) },
	}
}

// hostCPUMeasure: each part's host CPU per operation (qemu's, and the
// OSD's unless the part is a memory disk) against krbd's time per
// operation: how many of the host's cores the part needs to keep pace
// with krbd.
func hostCPUMeasure() ceilingMeasure {
	return ceilingMeasure{
		cost: func(c *Case, who string, memory bool) float64 {
			return medianOf(c, who, func(s Sample) float64 {
				used := s.HostVM
				if !memory {
					used += s.HostOSD
				}
				return s.hostCores(used) * secondsPerOp(s)
			})
		},
		krbd: func(c *Case) float64 { return medianOf(c, "krbd", secondsPerOp) },
		text: coresText,
	}
}

// part is contender's cost per operation in sec's case called name by m,
// over krbd's time per operation in the same case (NaN when either is
// missing).
func (m ceilingMeasure) part(sec *Section, name, contender string, memory bool) float64 {
	if !measuredSection(sec) {
		return math.NaN()
	}
	c := caseNamed(sec, name)
	if c == nil {
		return math.NaN()
	}
	return ratio(m.cost(c, contender, memory), m.krbd(c))
}

// ceilingPaths are the device paths measured, with their crossings alone.
func (k *KernelVM) ceilingPaths() []ceilingPath {
	var paths []ceilingPath
	if s := k.section("vm-rbd"); measuredSection(s) {
		floor, mem := k.section("vm-floor-nbd"), k.section("vm-memory")
		paths = append(paths, ceilingPath{name: "nbd.ko", target: nbdKRBDTarget, device: s,
			crossing: func(name string, m ceilingMeasure) float64 {
				// nbdkit's memory disk against krbd; purerbd's own,
				// measured beside nbdkit's in the memory group, where it
				// costs less
				nbdkit := m.part(floor, name, "nbdkit", true)
				if c := caseNamed(mem, name); measuredSection(mem) && c != nil {
					return nanMin(nbdkit, nbdkit*m.cost(c, "purerbd", true)/m.cost(c, "nbdkit", true))
				}
				return nbdkit
			}})
	}
	if s := k.section("vm-rbd-ublk"); measuredSection(s) {
		floor := k.section("vm-floor-ublk")
		paths = append(paths, ceilingPath{name: "ublk", target: ublkKRBDTarget, device: s,
			crossing: func(name string, m ceilingMeasure) float64 {
				return m.part(floor, name, "purerbd", true)
			}})
	}
	return paths
}

// ceilingRows gives a table row for each path's case that cases admits:
// the client alone and the crossing alone by m, their sum, the path's
// own cost, capacity over the sum (the ceiling), the rate measured and
// the verdict.
func (k *KernelVM) ceilingRows(m ceilingMeasure, capacity float64, cases func(name string) bool) []string {
	client := k.section("vm-rbd-client")
	if !measuredSection(client) {
		return nil
	}
	var rows []string
	for _, p := range k.ceilingPaths() {
		for _, c := range p.device.Cases {
			if !cases(c.Name) {
				continue
			}
			alone, crossing := m.part(client, c.Name, client.Contenders[0], false), p.crossing(c.Name, m)
			sum := alone + crossing
			if math.IsNaN(sum) {
				continue
			}
			ceiling := capacity / sum
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |", p.name, c.Name,
				m.text(alone), m.text(crossing), m.text(sum), m.text(m.part(p.device, c.Name, p.device.Contenders[0], false)),
				ratioText(ceiling, p.target), ratioText(c.Ratio(p.device.Contenders[0], "krbd"), p.target),
				ceilingVerdict(ceiling, p.target)))
		}
	}
	return rows
}

// writeCeilings sets, for the 4K cases, what the parts of a device path
// cost beside what the path took, and the most the path can reach
// against krbd for it.
//
// At queue depth 1 a request served from userspace crosses into the
// server, waits for the client's trip to the OSD and crosses back, one
// after the other: its latency is at least the crossing alone (a memory
// disk through the same kernel path) plus the client alone (the rbd
// package with no device), and its rate at most krbd's latency over that
// sum.
//
// At queue depth 32 the requests overlap, and what bounds them is the
// host: the VM and the OSD run on its cores, so a path's rate is at most
// those cores over the host CPU each request needs, at least the
// crossing's plus the client's. A run without the host's figures gives
// no such table.
//
// A ceiling under the target says that no server through that path
// reaches the target in this guest unless the crossing or the client
// alone gets faster.
func (k *KernelVM) writeCeilings(b *bytes.Buffer) {
	depth := func(qd string) func(string) bool {
		return func(name string) bool { return strings.HasPrefix(name, "4k ") && strings.HasSuffix(name, " "+qd) }
	}
	if rows := k.ceilingRows(latencyMeasure(), 1, depth("QD1")); len(rows) > 0 {
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
		writeCeilingTable(b, "client alone (latency × krbd's)", "ceiling (1 / sum)", rows)
	}
	if k.HostCPUs <= 0 {
		return
	}
	if rows := k.ceilingRows(hostCPUMeasure(), float64(k.HostCPUs), depth("QD32")); len(rows) > 0 {
		b.WriteString("### At queue depth 32 the host's cores bound each path: its ceiling\n\n")
		fmt.Fprintf(b, "At depth 32 requests overlap, and the guest's vCPUs, qemu's emulation of its devices and the OSD "+
			"all run on the host's %d CPUs. So a path's rate is at most those CPUs over the host CPU one of its "+
			"requests needs, which is at least what the crossing alone needs (qemu's CPU per request on a memory disk "+
			"through the same kernel path; for nbd.ko the cheaper of nbdkit's and purerbd's) plus what the client "+
			"alone needs (qemu's and the OSD's CPU per request of purerbd's rbd package with no device). Each part is "+
			"given in cores at krbd's rate in its own group: its CPU per request times the rate krbd reached there. "+
			"The ceiling is the host's CPUs over their sum, against krbd; the path's own column is what it needed "+
			"at krbd's rate, measured the same way, against the sum it cannot go below. The host's figures are "+
			"those of its own table in each group. Targets: nbd.ko ≥ %.2f× krbd, ublk ≥ %.2f× krbd. 1 MiB requests "+
			"are left out, as at depth 1.\n\n", k.HostCPUs, nbdKRBDTarget, ublkKRBDTarget)
		writeCeilingTable(b, "client alone (host cores at krbd's rate)", "ceiling (CPUs / sum)", rows)
	}
}

// writeCeilingTable writes a ceiling table of rows under its header,
// whose first part column is called first and ceiling column ceiling.
func writeCeilingTable(b *bytes.Buffer, first, ceiling string, rows []string) {
	fmt.Fprintf(b, "| path | case | %s | crossing alone | sum | the path on Ceph | "+
		"%s | measured rate / krbd | against the target |\n|---|---|---|---|---|---|---|---|---|\n", first, ceiling)
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	b.WriteString("\n")
}

// measuredSection reports whether sec is there and was not skipped.
func measuredSection(sec *Section) bool { return sec != nil && sec.Skipped == "" }

// coresText prints a number of cores with two decimals.
func coresText(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
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
	return medianOf(c, contender, func(s Sample) float64 {
		if s.MeanLat > 0 {
			return s.MeanLat / 1e3
		}
		return math.NaN() // not measured: spreadOf leaves it out
	})
}

// medianOf is the median over contender's runs in c of f, which gives
// NaN for a run that did not measure it; NaN when c is nil or no run
// did.
func medianOf(c *Case, contender string, f func(Sample) float64) float64 {
	if c == nil {
		return math.NaN()
	}
	return spreadOf(c.values(contender, f)).Median
}

// secondsPerOp is a run's length over its operations (NaN when it did
// none).
func secondsPerOp(s Sample) float64 {
	if s.Ops <= 0 || !(s.Seconds > 0) {
		return math.NaN()
	}
	return s.Seconds / float64(s.Ops)
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
