package guestbench

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// contender opens the device one contender serves.
type contender struct {
	name string
	open func(ctx context.Context) (device, error)
}

// group is one comparison: its contenders' devices are all attached for
// the whole group, filled, then every case runs reps times, the
// contenders interleaved (A B A B ...).
type group struct {
	name       string
	span       int64
	opts       options
	contenders []contender
}

func (g *group) run(ctx context.Context) (err error) {
	type open struct {
		name string
		dev  device
	}
	var devs []open
	defer func() {
		for _, d := range devs {
			if cerr := d.dev.Close(ctx); cerr != nil {
				note("%s: %s: closing %s: %v", g.name, d.name, d.dev.Path(), cerr)
			}
		}
	}()
	for _, c := range g.contenders {
		d, err := c.open(ctx)
		if err != nil {
			if len(devs) == 0 {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			note("%s: %s could not run: %v", g.name, c.name, err)
			continue
		}
		devs = append(devs, open{c.name, d})
		fmt.Printf("  %s: %s on %s\n", g.name, c.name, d.Path())
		var fillErr error
		if sl, ok := d.(selfLoaded); ok {
			fillErr = sl.fill(ctx, g.span)
		} else {
			fillErr = fill(d.Path(), g.span)
		}
		if fillErr != nil {
			return fmt.Errorf("%s: %w", c.name, fillErr)
		}
	}
	failures := 0
	for rep := 1; rep <= g.opts.reps; rep++ {
		for _, c := range ioCases(g.opts.quick) {
			for _, d := range devs {
				if err := ctx.Err(); err != nil {
					return err
				}
				rec, err := g.measure(ctx, d.name, d.dev, c, rep)
				if err != nil {
					note("%s: %s %s rep %d: %v", g.name, d.name, c.Name, rep, err)
					if failures++; failures > 5 {
						return errors.New("too many failed runs")
					}
					continue
				}
				emit(PrefixSample, rec)
				if g.opts.traceMM {
					// counted after the run's end mark: reading the
					// trace is work the run did not do
					g.printMMTrace(d.name, c, rep, rec.Ops)
				}
			}
		}
	}
	return nil
}

// printMMTrace counts the address-space switches of the run just
// measured and prints them.
func (g *group) printMMTrace(who string, c ioCase, rep int, ops int64) {
	sw, err := countMMTrace()
	if err != nil {
		note("%s: %s %s rep %d: %v", g.name, who, c.Name, rep, err)
		return
	}
	fmt.Printf("%s%s %s %s rep %d: %s\n", PrefixMMTrace, g.name, c.Name, who, rep, sw.summary(ops))
}

// measure runs one case on one device and returns its record.
func (g *group) measure(ctx context.Context, who string, d device, c ioCase, rep int) (SampleRecord, error) {
	rec := SampleRecord{Group: g.name, Case: c.Name, Unit: c.Unit, Contender: who, Rep: rep, CPU: -1,
		GuestCPU: -1, Switches: -1, ServerSwitches: -1, ServerVoluntary: -1, ServerBusiestThread: -1, ServerThreads: -1}
	mark := MarkRecord{Event: MarkStart, Group: g.name, Case: c.Name, Contender: who, Rep: rep}
	emit(PrefixMark, mark)
	defer func() {
		mark.Event = MarkEnd
		emit(PrefixMark, mark)
	}()
	pid := d.PID()
	if (g.opts.pin || g.opts.pinServer) && pid > 0 && pid != os.Getpid() {
		if err := pinProcess(pid, serverCPU); err != nil {
			return rec, err
		}
	}
	var cpu0 float64
	var sw0 map[string]switchCount
	var swErr error
	if pid > 0 {
		cpu0, _ = procCPU(pid)
		sw0, swErr = threadSwitches(pid)
	}
	st0, stErr := readGuestStat()
	if g.opts.traceMM {
		if err := startMMTrace(); err != nil {
			return rec, err
		}
	}
	var r ioResult
	var err error
	if sl, ok := d.(selfLoaded); ok {
		r, err = sl.runCase(ctx, c, g.span, g.opts.runtime)
	} else if g.opts.fioLoad {
		r, err = fioOnDevice(ctx, g.opts.fio, d.Path(), c, g.span, g.opts.runtime)
	} else {
		r, err = runIO(ctx, d.Path(), g.span, c, g.opts.runtime, g.opts.runtimeSyscalls)
	}
	if g.opts.traceMM {
		if err := pauseMMTrace(); err != nil {
			return rec, err
		}
	}
	if err != nil {
		return rec, err
	}
	// a client run as a process of its own (fio) starts and connects
	// within the guest's figures: those are left out
	if st1, err := readGuestStat(); err == nil && stErr == nil && !r.ownProcess {
		rec.GuestCPU, rec.Switches = st1.busy-st0.busy, st1.switches-st0.switches
	}
	if pid > 0 {
		if cpu1, err := procCPU(pid); err == nil {
			rec.CPU = cpu1 - cpu0
		}
		if sw1, err := threadSwitches(pid); err == nil && swErr == nil {
			sw := switchesBetween(sw0, sw1)
			rec.ServerSwitches, rec.ServerVoluntary = sw.total, sw.voluntary
			rec.ServerBusiestThread, rec.ServerThreads = sw.busiest, sw.threads
		}
		if _, hwm, err := procMem(pid); err == nil {
			rec.RSS = hwm
		}
	}
	rec.Ops, rec.Bytes, rec.Seconds = r.ops, r.bytes, r.seconds
	if c.Unit == "IOPS" {
		rec.Value = float64(r.ops) / r.seconds
	} else {
		rec.Value = float64(r.bytes) / (1 << 20) / r.seconds
	}
	rec.MeanNs, rec.P50Ns, rec.P99Ns, rec.P999Ns = r.mean(), r.percentile(50), r.percentile(99), r.percentile(99.9)
	return rec, nil
}
