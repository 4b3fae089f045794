package kernel

import (
	"context"
	"log/slog"
	"time"
)

// Timeout returns the request timeout the kernel was last told for this
// device, in whole seconds; 0 means the kernel's default (30 s). With an
// adaptive timeout (AttachConfig.MinTimeout) it moves between the floor
// and the ceiling.
func (d *Device) Timeout() time.Duration { return time.Duration(d.curTimeout.Load()) }

// Dropped returns how many times the kernel dropped a connection of this
// device while it was served (each was replaced): a request outlived the
// timeout, or a connection broke.
func (d *Device) Dropped() int64 { return d.dropped.Load() }

// Adaptive reports whether the request timeout adapts.
func (d *Device) Adaptive() bool { return d.policy != nil }

// ResendInterval returns how often the kernel looks at requests in
// flight on a device without a request timeout (AttachConfig.
// ResendInterval), 0 when the device has a timeout.
func (d *Device) ResendInterval() time.Duration { return d.resend }

// applyResendInterval sets the queue's io_timeout to the resend
// interval. Where sysfs cannot be written the kernel looks every 30 s,
// its default: a restart then stalls I/O for up to that long.
func (d *Device) applyResendInterval() {
	if d.resend <= 0 || d.client == nil {
		return
	}
	if err := d.client.sys.setIOTimeout(d.index, d.resend); err != nil {
		d.log.Warn("nbd: cannot set the resend interval: requests in flight at a restart wait up to the kernel's 30 s", "resend_interval", d.resend, "err", err)
	}
}

// timeoutAttrs describes the request timeout for a log record.
func (d *Device) timeoutAttrs() slog.Attr {
	if d.resend > 0 {
		return slog.Group("timeout", "none_resend_every", d.resend)
	}
	if d.policy == nil {
		return slog.Group("timeout", "fixed", d.Timeout())
	}
	return slog.Group("timeout", "adaptive_from", d.policy.min, "adaptive_to", d.policy.max, "now", d.Timeout())
}

// startTimeoutWindows weighs the service times of an adaptive timeout
// once a window, lowering the timeout when requests have been fast, until
// ctx ends; the returned channel is closed when it has stopped.
func (d *Device) startTimeoutWindows(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if d.policy == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(d.policy.window)
		defer tick.Stop()
		d.serviceTimes.Roll() // what came before the start is no window
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				d.weighWindow(ctx, now)
			}
		}
	}()
	return done
}

// weighWindow ends a window of service times and lowers the timeout if
// the policy says so.
func (d *Device) weighWindow(ctx context.Context, now time.Time) {
	d.timeoutMu.Lock()
	defer d.timeoutMu.Unlock()
	w := d.serviceTimes.Roll()
	prev := d.Timeout()
	t, lowered := d.policy.onWindow(now, w)
	if !lowered {
		if w.Lingering || w.Longest >= prev/4 {
			d.log.Debug("nbd: request timeout window not calm", "timeout", prev, "longest_request", w.Longest, "lingering", w.Lingering)
		}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, healTimeout)
	defer cancel()
	if err := d.client.Reconfigure(ctx, ReconfigureRequest{Index: d.index, Timeout: t, BackendIdentifier: d.cookie}); err != nil {
		if ctx.Err() == nil {
			d.log.Warn("nbd: lowering the request timeout", "timeout", t, "err", err)
		}
		return
	}
	d.curTimeout.Store(int64(t))
	d.log.Info("nbd: request timeout lowered: requests have been fast",
		"timeout", t, "previous", prev, "min_timeout", d.policy.min, "longest_request", w.Longest)
}

// fixTimeout gives up adapting: the timeout goes to the ceiling and stays
// there.
func (d *Device) fixTimeout(why string) {
	if d.policy == nil {
		return
	}
	d.timeoutMu.Lock()
	defer d.timeoutMu.Unlock()
	t := d.policy.max
	d.policy = nil
	ctx, cancel := context.WithTimeout(d.serveCtx, healTimeout)
	defer cancel()
	if err := d.client.Reconfigure(ctx, ReconfigureRequest{Index: d.index, Timeout: t, BackendIdentifier: d.cookie}); err != nil {
		d.log.Warn("nbd: setting the request timeout to its ceiling", "timeout", t, "err", err)
		return
	}
	d.curTimeout.Store(int64(t))
	d.log.Warn("nbd: the request timeout stops adapting and stays at its ceiling: "+why, "timeout", t)
}
