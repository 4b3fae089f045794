package bench

import (
	"bytes"
	"fmt"
	"math"
)

// guestCPUOf says how the kernel-path sections take the whole guest's
// CPU and context switches per op.
const guestCPUOf = "the whole guest's busy CPU time (/proc/stat: all its CPUs, everything but idle, iowait and " +
	"steal; 10 ms ticks) and context switches (ctxt), read before and after each run and divided by the " +
	"operations it completed. They count every process, kernel thread and interrupt that served the run, the " +
	"guest program's own included, so krbd's work in the kernel is counted as the userspace servers' is; " +
	"a switch is a CPU going from one task to another, so each sleep and wake-up of a thread counts"

// GuestCPUPerMop is the whole guest's busy CPU seconds per million
// operations (NaN when not measured).
func (s Sample) GuestCPUPerMop() float64 { return perOp(s.GuestCPU, s.Ops) * 1e6 }

// SwitchesPerOp is the whole guest's context switches per operation
// (NaN when not measured).
func (s Sample) SwitchesPerOp() float64 { return perOp(s.Switches, s.Ops) }

// ServerSwitchesPerOp is how many times per operation the serving
// process's threads were switched out (NaN when not measured).
func (s Sample) ServerSwitchesPerOp() float64 { return perOp(s.ServerSwitches, s.Ops) }

// perOp is v per operation; NaN when there were no operations or v was
// not measured (NaN, or 0 in samples older than the field).
func perOp(v float64, ops int64) float64 {
	if ops <= 0 || !(v > 0) {
		return math.NaN()
	}
	return v / float64(ops)
}

// writeGuestCPU is the table of what each contender's runs cost the
// whole guest per op: the one CPU figure that counts a kernel driver's
// work as well as a userspace server's.
func writeGuestCPU(b *bytes.Buffer, sec *Section) {
	a, p := sec.Contenders[0], sec.Contenders[1]
	measured := false
	for _, c := range sec.Cases {
		if !math.IsNaN(spreadOf(c.values(a, Sample.GuestCPUPerMop)).Median) {
			measured = true
		}
	}
	if !measured {
		return
	}
	fmt.Fprintf(b, "\nThe whole guest per op: %s. Beside them, how many times per op the serving process's own "+
		"threads were switched out (/proc/PID/task/*/status), the part of the guest's switches that is "+
		"the server's waits. Medians over runs.\n\n", sec.GuestOf)
	fmt.Fprintf(b, "| case | guest CPU µs/op %[1]s | %[2]s | ratio | switches/op %[1]s | %[2]s | ratio | "+
		"server's own %[1]s | %[2]s |\n|---|---|---|---|---|---|---|---|---|\n", a, p)
	for _, c := range sec.Cases {
		cA, cP := spreadOf(c.values(a, Sample.GuestCPUPerMop)).Median, spreadOf(c.values(p, Sample.GuestCPUPerMop)).Median
		sA, sP := spreadOf(c.values(a, Sample.SwitchesPerOp)).Median, spreadOf(c.values(p, Sample.SwitchesPerOp)).Median
		vA, vP := spreadOf(c.values(a, Sample.ServerSwitchesPerOp)).Median, spreadOf(c.values(p, Sample.ServerSwitchesPerOp)).Median
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Name, num(cA), num(cP), ratioCell(ratio(cA, cP)),
			num(sA), num(sP), ratioCell(ratio(sA, sP)), num(vA), num(vP))
	}
}
