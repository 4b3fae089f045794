package bench

import (
	"log/slog"
	"slices"
	"time"
)

// Section identifiers accepted by Config.Only.
const (
	SectionNBD       = "nbd"       // NBD memory export: purerbd vs nbdkit
	SectionRados     = "rados"     // purerbd rados bench vs rados bench
	SectionRBD       = "rbd"       // rbd package vs librbd (fio), default features and layering only
	SectionRBDCLI    = "rbd-cli"   // purerbd rbd bench vs rbd bench
	SectionRBDNBD    = "rbd-nbd"   // NBD export of an image: purerbd vs qemu-nbd
	SectionBluestore = "bluestore" // the RBD comparison again on a bluestore OSD
	SectionCSI       = "csi"       // CSI controller call latencies
	SectionProfile   = "profile"   // pprof of the purerbd side
	SectionKernelVM  = "kernel-vm" // kernel path and node plugin in a VM (software-emulated)
	SectionFootprint = "footprint" // binary and image sizes
)

// VMClockTSC is the Config.VMClock that keeps the guest on the TSC.
const VMClockTSC = "tsc"

// Config is one run of the suite.
type Config struct {
	// Root is the module's root directory, where the binaries are built.
	Root string
	// ReportDir receives report.md and the SVG plots.
	ReportDir string
	// WorkDir holds scratch files (binaries, sockets, fio output, raw
	// results, profiles). Empty: a temporary directory removed at the end.
	WorkDir string
	// Quick runs everything small (seconds per case) to check the harness.
	Quick bool
	// Only restricts the run to these sections; empty runs all.
	Only []string
	// Reps is the number of repetitions per contender and case (default
	// 6, at least the 5 issue #30 asks of every figure; 2 in quick mode),
	// rounded up to an even number, so that each of two contenders runs
	// first as often as the other (see interleave).
	Reps int
	// VMProfile, when set, has the kernel-vm guest profile each purerbd
	// server (nbd.ko and ublk, behind Ceph and on a memory disk) and the
	// rbd package alone this long per 4 KiB case of depth VMProfileQD
	// after the measured runs; the CPU profiles and their `go tool pprof
	// -top` land in WorkDir/vm beside the VM's console log.
	VMProfile time.Duration
	// VMProfileQD is the queue depth of the profiled cases: 1 or 32
	// (0: 32).
	VMProfileQD int
	// VMClock chooses the kernel-vm guest's clocksource: "" leaves it to
	// the kernel, which under TCG marks the TSC unstable and falls back
	// to the emulated HPET, where every clock read is a system call and
	// an emulated device access; VMClockTSC keeps the TSC (tsc=reliable),
	// so that clock reads stay in userspace through the vDSO as they do
	// on hardware and under KVM.
	VMClock string
	// VMServerEnv is added to the environment of the purerbd servers the
	// kernel-vm guest starts (`nbd map`, `device map`), as KEY=VALUE
	// (GOMAXPROCS=1, GODEBUG=...): for experiments on the Go runtime's
	// part in each request's cost. The report names it beside the
	// figures it changed.
	VMServerEnv []string
	// VMKernelArgs are added to the kernel-vm guest's kernel command
	// line (maxcpus=1, idle=poll...): for experiments on the guest's
	// part in each request's cost. The report names them beside the
	// figures they changed.
	VMKernelArgs []string
	// VMPin pins the kernel-vm guest program to one vCPU and its servers
	// to the other: an experiment on the emulator's TLB flushes when a
	// vCPU switches processes. The report says so.
	VMPin bool
	// VMPinServer pins only the kernel-vm servers to one vCPU and leaves
	// the guest program to the guest's scheduler: what a node plugin
	// could do about the emulator's TLB flushes by itself, placing no
	// thread but its own. The report says so.
	VMPinServer bool
	// VMTraceMM traces the kernel-vm guest's context switches in each run
	// and prints on its console how often a vCPU changed address space,
	// by process pair: whose switches the emulator's TLB flushes are.
	// Tracing slows every switch; the report says so.
	VMTraceMM bool
	// VMFioLoad has the kernel-vm guest run its block-device cases
	// through fio's libaio engine instead of the guest program's Go
	// goroutines: an experiment on the load's own part in each request's
	// cost (a Go program wakes runtime threads beside the one doing the
	// I/O). The report says so.
	VMFioLoad bool
	// VMRuntimeSyscalls has the kernel-vm guest program read and write
	// the block devices through the Go runtime's system calls from a
	// goroutine per request in flight, as every run up to 2026-12-06
	// 22:55 UTC did, instead of raw calls at queue depth 1 (guestbench's
	// rawFile) and Linux AIO from one goroutine at depth 32 (runAIO): an
	// experiment on the load's own runtime threads. The report says so.
	VMRuntimeSyscalls bool
	// Runtime is the measured time of one run of a time-based job
	// (default 2 s; 1 s in quick mode).
	Runtime time.Duration
	// Releases are the Ceph releases (ReleasePacific, ReleaseReef,
	// ReleaseTentacle) whose clusters the RADOS and RBD sections run on,
	// each with its own peer tools; empty: Pacific only.
	Releases []string
	// Tunings are the kinds of cluster (Tuned, Untuned) each release
	// boots; empty: tuned only.
	Tunings []string
	Logger  *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Reps <= 0 {
		c.Reps = 6
		if c.Quick {
			c.Reps = 2
		}
	}
	c.Reps += c.Reps % 2
	if c.Runtime <= 0 {
		c.Runtime = 2 * time.Second
		if c.Quick {
			c.Runtime = time.Second
		}
	}
	if len(c.Releases) == 0 {
		c.Releases = []string{ReleasePacific}
	}
	if len(c.Tunings) == 0 {
		c.Tunings = []string{Tuned}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Root == "" {
		c.Root = "."
	}
	if c.ReportDir == "" {
		c.ReportDir = "bench"
	}
	return c
}

// wants reports whether section id is selected.
func (c Config) wants(id string) bool {
	return len(c.Only) == 0 || slices.Contains(c.Only, id)
}

// nbdRuntime is the run time of the NBD fio jobs: at most 2 s, since a
// userspace NBD server's rate settles at once, which leaves the time
// budget of a full run to the cluster workloads.
func (c Config) nbdRuntime() time.Duration {
	return min(c.Runtime, 2*time.Second)
}

// pick returns quick in quick mode and full otherwise.
func pick[T any](c Config, full, quick T) T {
	if c.Quick {
		return quick
	}
	return full
}

// Sections lists the section identifiers in the order they run.
func Sections() []string {
	return []string{SectionNBD, SectionRados, SectionRBD, SectionRBDCLI, SectionRBDNBD, SectionBluestore,
		SectionCSI, SectionProfile, SectionKernelVM, SectionFootprint}
}
