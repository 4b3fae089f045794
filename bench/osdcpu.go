package bench

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// osdCPUOf says how the RBD-family sections take the OSD's CPU per op.
const osdCPUOf = "the OSD process's utime+stime (/proc/PID/stat of ceph-osd, 10 ms ticks) read before and after " +
	"each run, divided by the client operations the run completed; it includes what the OSD did for the " +
	"client's start-up (connecting, opening the image) and its own background ticks"

// osdCPU returns the CPU time (user + system seconds) the cluster's OSD
// processes have used so far.
func (c *cluster) osdCPU() (float64, error) {
	var total float64
	for i := range c.Options.OSDs {
		name := "osd." + strconv.Itoa(i)
		pid := c.PID(name)
		if pid == 0 {
			return 0, fmt.Errorf("bench: %s is not running", name)
		}
		cpu, err := procCPU(pid)
		if err != nil {
			return 0, fmt.Errorf("bench: %s: %w", name, err)
		}
		total += cpu
	}
	return total, nil
}

// watchOSD makes sec read the cluster's OSD CPU around each of its runs.
func (c *cluster) watchOSD(sec *Section) {
	sec.osd, sec.OSDOf = c.osdCPU, osdCPUOf
}

// osdCPUPerOp is the median over a contender's runs of the OSDs' CPU
// seconds per million client operations.
func osdCPUPerOp(c *Case, who string) float64 {
	return spreadOf(c.values(who, Sample.OSDCPUPerMop)).Median
}

// writeOSDCPU is the table of the OSD's CPU per client op beside the
// client's own, so that a client which saves its CPU by spending the
// OSD's shows it.
func writeOSDCPU(b *bytes.Buffer, sec *Section) {
	a, p := sec.Contenders[0], sec.Contenders[1]
	fmt.Fprintf(b, "\nOSD CPU per client op: %s. Medians over runs, in CPU s/Mop (= µs per op); "+
		"client + OSD is the sum of both per run.\n\n", sec.OSDOf)
	fmt.Fprintf(b, "| case | OSD %[1]s | OSD %[2]s | OSD ratio | OSD %[1]s min–max | OSD %[2]s min–max | client + OSD %[1]s | client + OSD %[2]s | ratio |\n"+
		"|---|---|---|---|---|---|---|---|---|\n", a, p)
	for _, c := range sec.Cases {
		oA, oP := spreadOf(c.values(a, Sample.OSDCPUPerMop)), spreadOf(c.values(p, Sample.OSDCPUPerMop))
		tA := spreadOf(c.values(a, Sample.TotalCPUPerMop)).Median
		tP := spreadOf(c.values(p, Sample.TotalCPUPerMop)).Median
		rng := func(s Spread) string {
			if math.IsNaN(s.Min) {
				return "–"
			}
			return num(s.Min) + "–" + num(s.Max)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Name, num(oA.Median), num(oP.Median),
			ratioCell(ratio(oA.Median, oP.Median)), rng(oA), rng(oP), num(tA), num(tP), ratioCell(ratio(tA, tP)))
	}
}
