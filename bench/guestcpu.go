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

// ServerVoluntaryPerOp is how many of the serving process's switches
// per operation were waits (NaN when not measured).
func (s Sample) ServerVoluntaryPerOp() float64 { return perOp(s.ServerVoluntary, s.Ops) }

// ServerBusiestPerOp is the switches per operation of the serving
// process's busiest thread (NaN when not measured).
func (s Sample) ServerBusiestPerOp() float64 { return perOp(s.ServerBusiestThread, s.Ops) }

// ServerThreadCount is how many of the serving process's threads were
// switched out during the run (NaN when not measured).
func (s Sample) ServerThreadCount() float64 {
	if !(s.ServerThreads > 0) {
		return math.NaN()
	}
	return s.ServerThreads
}

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

// writeServerThreads is the table of how the serving processes' own
// switches fall: waits or preemptions, and over how many threads. A
// server whose switches are spread over many threads hands each request
// between them; one whose busiest thread switches once per request or
// more has a thread in every request's path.
func writeServerThreads(b *bytes.Buffer, sec *Section) {
	var servers []string
	for _, who := range sec.Contenders {
		for _, c := range sec.Cases {
			if !math.IsNaN(spreadOf(c.values(who, Sample.ServerVoluntaryPerOp)).Median) {
				servers = append(servers, who)
				break
			}
		}
	}
	if len(servers) == 0 {
		return
	}
	b.WriteString("\nThe serving process's own switches per op (/proc/PID/task/*/status, read before and after each " +
		"run): all of them, the voluntary ones (a thread waited; the rest are preemptions), those of its " +
		"busiest thread, and how many threads were switched out at all. Medians over runs.\n\n")
	b.WriteString("| case | server | switches/op | voluntary | busiest thread | threads |\n|---|---|---|---|---|---|\n")
	for _, c := range sec.Cases {
		for _, who := range servers {
			med := func(f func(Sample) float64) float64 { return spreadOf(c.values(who, f)).Median }
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", c.Name, who, num(med(Sample.ServerSwitchesPerOp)),
				num(med(Sample.ServerVoluntaryPerOp)), num(med(Sample.ServerBusiestPerOp)), num(med(Sample.ServerThreadCount)))
		}
	}
}
