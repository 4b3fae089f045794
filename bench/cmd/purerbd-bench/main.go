// Command purerbd-bench runs purerbd's benchmark suite (package bench)
// and writes bench/report.md with its SVG plots. Run it from the
// repository root; `make bench` does.
//
//	purerbd-bench [-quick] [-only nbd,rbd,...] [-reps 6] [-runtime 2s] [-report bench] [-work bench/out]
//	              [-ceph pacific,reef,tentacle] [-cluster tuned,untuned]
//
// BENCH_QUICK=1 in the environment is the same as -quick.
//
// Two sub-commands are the purerbd-side workers the suite runs as child
// processes (so that getrusage measures them alone):
//
//	purerbd-bench load -c ceph.conf -p POOL (--image NAME | --objects PREFIX) --rw randwrite --bs 4K --qd 32 --runtime 3s
//	purerbd-bench serve (-c ceph.conf -p POOL --image NAME | --memory SIZE) --socket PATH
//
// Both take --cpuprofile and --memprofile. A third runs inside the VM of
// the kernel-path section (package bench/internal/guestbench):
//
//	purerbd-bench guest [-nbdkit PATH] [-mon MON -images A,B -node-images V0,...]
//
// And one draws a report again from what earlier runs left in their
// report directories (report.gob), merging them when there are several:
// a run per release or cluster kind, or a section run alone, makes one
// report with a column per kind (later runs win where two measured the
// same section on the same kind):
//
//	purerbd-bench render [-report bench] DIR...
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/purerbd/purerbd/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	args := os.Args[1:]
	var err error
	switch {
	case len(args) > 0 && args[0] == "load":
		err = runLoad(ctx, args[1:], os.Stdout, os.Stderr)
	case len(args) > 0 && args[0] == "serve":
		err = runServe(ctx, args[1:], os.Stdout, os.Stderr)
	case len(args) > 0 && args[0] == "guest":
		err = runGuest(ctx, args[1:])
	case len(args) > 0 && args[0] == "render":
		err = runRender(args[1:])
	default:
		err = run(ctx, args)
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "purerbd-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("purerbd-bench", flag.ContinueOnError)
	quick := fs.Bool("quick", os.Getenv("BENCH_QUICK") == "1", "run everything small (harness check: about 7 min, half of it the kernel-vm section's VM)")
	only := fs.String("only", "", "comma-separated sections to run (default all): "+strings.Join(bench.Sections(), ","))
	vmProfile := fs.Duration("vm-profile", 0, "kernel-vm: after the measured runs, CPU-profile the guest's purerbd servers (nbd.ko, ublk, behind Ceph and on a memory disk) and the rbd package alone this long per 4K case; the profiles land in the work directory")
	vmProfileQD := fs.Int("vm-profile-qd", 32, "kernel-vm: the queue depth of the profiled 4K cases: 1 or 32")
	vmClock := fs.String("vm-clock", "", "kernel-vm: the guest's clocksource: empty leaves it to the kernel (hpet under TCG, where clock reads are system calls), "+
		bench.VMClockTSC+" keeps the TSC (tsc=reliable) so that clock reads go through the vDSO as on hardware")
	vmKernelArgs := fs.String("vm-kernel-args", "", "kernel-vm: space-separated arguments added to the guest kernel's command line (an experiment on the guest, e.g. maxcpus=1; the report says so)")
	vmPin := fs.Bool("vm-pin", false, "kernel-vm: pin the guest program to the first vCPU and the servers to the second (an experiment on the emulator's TLB flushes; the report says so)")
	vmPinServer := fs.Bool("vm-pin-server", false, "kernel-vm: pin only the servers to the second vCPU and leave the guest program to the guest's scheduler (an experiment on what a server can do alone about the emulator's TLB flushes; the report says so)")
	vmTraceMM := fs.Bool("vm-trace-mm", false, "kernel-vm: trace the guest's context switches in each run and print on its console how often a vCPU changed address space, by process pair (an experiment on the emulator's TLB flushes; tracing slows the runs, and the report says so)")
	vmFioLoad := fs.Bool("vm-fio-load", false, "kernel-vm: run the block-device cases through fio's libaio engine instead of the guest program's goroutines (an experiment on the load's part in each request's cost; the report says so)")
	vmRuntimeSyscalls := fs.Bool("vm-runtime-syscalls", false, "kernel-vm: have the guest program read and write the block devices through the Go runtime's system calls, a goroutine per request in flight, as runs up to 2026-12-06 22:55 UTC did, instead of raw calls at queue depth 1 and Linux AIO from one goroutine at depth 32 (an experiment on the load's own runtime threads; the report says so)")
	vmServerEnv := fs.String("vm-server-env", "", "kernel-vm: comma-separated KEY=VALUE added to the environment of the guest's purerbd servers (an experiment on the Go runtime, e.g. GOMAXPROCS=1; the report says so)")
	reps := fs.Int("reps", 0, "repetitions per contender and case (default 6, 2 with -quick; an odd number is rounded up, so that each contender runs first as often as the other)")
	runtime := fs.Duration("runtime", 0, "measured time per time-based run (default 2s, quick 1s; NBD jobs at most 2s)")
	report := fs.String("report", "bench", "directory for report.md and the SVG plots")
	work := fs.String("work", "bench/out", "scratch directory (binaries, sockets, profiles, logs)")
	root := fs.String("root", ".", "repository root, where the binaries are built")
	ceph := fs.String("ceph", bench.ReleasePacific, "comma-separated Ceph releases the RADOS and RBD sections run on, "+
		"each with its own peer tools: "+strings.Join(bench.Releases(), ",")+" (reef and tentacle from roots built "+
		"into the cache by rados/radostest/cephcluster/roots/build-root.sh)")
	kinds := fs.String("cluster", bench.Tuned, "comma-separated cluster kinds each release boots: "+
		strings.Join(bench.Tunings(), ",")+" (untuned: the release's defaults for what the bench tunes)")
	verbose := fs.Bool("v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	cfg := bench.Config{
		Root: *root, ReportDir: *report, WorkDir: *work, Quick: *quick, Reps: *reps, Runtime: *runtime, VMProfile: *vmProfile, VMProfileQD: *vmProfileQD, VMClock: *vmClock,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	}
	if *vmServerEnv != "" {
		cfg.VMServerEnv = strings.Split(*vmServerEnv, ",")
	}
	if *vmKernelArgs != "" {
		cfg.VMKernelArgs = strings.Fields(*vmKernelArgs)
	}
	cfg.VMPin = *vmPin
	cfg.VMPinServer = *vmPinServer
	cfg.VMTraceMM = *vmTraceMM
	cfg.VMFioLoad = *vmFioLoad
	cfg.VMRuntimeSyscalls = *vmRuntimeSyscalls
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	if *ceph != "" {
		cfg.Releases = strings.Split(*ceph, ",")
	}
	if *kinds != "" {
		cfg.Tunings = strings.Split(*kinds, ",")
	}
	t0 := time.Now()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s/report.md in %s\n", *report, time.Since(t0).Round(time.Second))
	for _, m := range rep.Missing {
		fmt.Println("not measured:", m)
	}
	return nil
}
