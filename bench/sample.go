package bench

import "math"

// Sample is one run of one contender on one case.
type Sample struct {
	Value   float64 // the headline figure, in the case's Unit
	Ops     int64   // operations completed in the measured interval
	Bytes   int64   // bytes moved in the measured interval
	Seconds float64 // length of the measured interval
	// CPU is the CPU time (user + system, seconds) of the contender's
	// process during the run; NaN when not measured.
	CPU float64
	// OSDCPU is the CPU time (user + system, seconds) the cluster's OSD
	// processes spent during the run, whoever asked for it; NaN when the
	// run's section does not measure it (Section.OSDOf is empty) or it
	// could not be read.
	OSDCPU float64
	// GuestCPU is the busy time (seconds) of all the CPUs of the VM the
	// run was served in, and Switches the context switches they made;
	// NaN or 0 when not measured (only kernel-path sections do).
	GuestCPU float64
	Switches float64
	// ServerSwitches is how many times the serving process's threads
	// were switched out during the run; NaN or 0 when not measured.
	ServerSwitches float64
	// ServerVoluntary is the part of ServerSwitches where a thread
	// waited, ServerBusiestThread the switches of the thread that made
	// the most, and ServerThreads how many threads made any; NaN or 0
	// when not measured.
	ServerVoluntary     float64
	ServerBusiestThread float64
	ServerThreads       float64
	// HostSeconds is the window over which the host read its own CPU
	// around a kernel-path run (0 when not measured); HostBusy is the
	// host's busy CPU seconds in it, HostVM the VM's qemu process's,
	// HostVCPU the part of HostVM its vCPU threads spent and HostOSD the
	// cluster's OSDs' (NaN when unknown); HostPackets is the packets
	// through the VM's NIC in it and HostTLBFlushes the emulator's
	// software-TLB flushes (NaN when unknown).
	HostSeconds, HostBusy, HostVM, HostVCPU, HostOSD, HostPackets, HostTLBFlushes float64
	// RSS is the peak resident set of the contender's process in bytes;
	// 0 when unknown.
	RSS int64
	// Lat holds completion latencies at percentiles; nil when the tool
	// reports none.
	Lat *Latency
	// MeanLat is the mean completion latency in nanoseconds (NaN or 0
	// when unknown).
	MeanLat float64
}

// CPUPerGiB is CPU seconds per GiB moved (NaN when unknown).
func (s Sample) CPUPerGiB() float64 {
	if s.Bytes <= 0 {
		return math.NaN()
	}
	return s.CPU / (float64(s.Bytes) / (1 << 30))
}

// CPUPerMop is CPU seconds per million operations (NaN when unknown).
func (s Sample) CPUPerMop() float64 {
	if s.Ops <= 0 {
		return math.NaN()
	}
	return s.CPU / (float64(s.Ops) / 1e6)
}

// OSDCPUPerMop is the OSDs' CPU seconds per million client operations
// (NaN when unknown).
func (s Sample) OSDCPUPerMop() float64 {
	if s.Ops <= 0 {
		return math.NaN()
	}
	return s.OSDCPU / (float64(s.Ops) / 1e6)
}

// TotalCPUPerMop is the client's and the OSDs' CPU seconds together per
// million client operations: what a client costs the machine.
func (s Sample) TotalCPUPerMop() float64 {
	return s.CPUPerMop() + s.OSDCPUPerMop()
}

// Latency is a latency distribution given at percentiles.
type Latency struct {
	Percentiles []float64 // ascending, e.g. 1, 5, ..., 99.99
	Nanos       []float64 // latency at each percentile, nanoseconds
}

// At returns the latency at percentile p (NaN if not reported).
func (l *Latency) At(p float64) float64 {
	if l == nil {
		return math.NaN()
	}
	for i, q := range l.Percentiles {
		if math.Abs(q-p) < 1e-9 {
			return l.Nanos[i]
		}
	}
	return math.NaN()
}
