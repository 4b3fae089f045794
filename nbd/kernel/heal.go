package kernel

import (
	"context"
	"errors"
	"sync"
	"time"
)

// healTimeout bounds one replacement of a dead connection.
const healTimeout = 30 * time.Second

// MsgConnectionReplaced is the message of the record a Device logs (at
// warning level) each time it replaced a connection the kernel dropped.
const MsgConnectionReplaced = "nbd: the kernel dropped a connection (a request outlived its timeout, or the connection broke); replaced it"

// startHealer watches the kernel's LINK_DEAD notifications for this
// device and hands the kernel a fresh socket for each connection it
// declares dead, for as long as the device is served. The kernel drops a
// connection when a request on it outlives the request timeout (a slow
// backend, a starved machine) and resends the request on another one;
// without a replacement the device would lose a queue each time and fail
// once the last one went. A disconnect somebody asked for sends no
// notification, so a disconnected device is never brought back.
func (d *Device) startHealer() {
	w, err := d.client.WatchLinks()
	if err != nil {
		d.log.Warn("nbd: not watching for dead connections: connections the kernel drops will not be replaced", "err", err)
		d.fixTimeout("connections the kernel drops cannot be seen")
		return
	}
	if CurrentNetns("") == NetnsOther {
		// Subscribing worked, but nothing will arrive.
		d.log.Warn("nbd: " + linkDeadProblem)
		d.fixTimeout("connections the kernel drops cannot be seen in this network namespace")
	}
	ctx := d.healCtx
	done := make(chan struct{})
	windowsDone := d.startTimeoutWindows(ctx)
	d.stopHeal = sync.OnceFunc(func() {
		d.healCancel()
		<-done
		<-windowsDone
	})
	d.wg.Add(1) // Done waits for the healer too: it may add connections
	go func() {
		defer d.wg.Done()
		defer close(done)
		defer w.Close()
		for {
			index, err := w.Next(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, ErrNotificationsLost):
				d.log.Warn("nbd: link notifications were lost; a connection the kernel dropped may stay unreplaced")
			case err != nil:
				d.log.Warn("nbd: no longer watching for dead connections", "err", err)
				return
			case index == d.index:
				d.replaceDead(ctx)
			}
		}
	}()
}

// replaceDead offers the kernel one fresh socket, which it takes in place
// of a dead connection.
//
// With an adaptive timeout the drop says that a request outlived it: the
// same RECONFIGURE carries the raised timeout, so that the fresh socket
// starts with it.
func (d *Device) replaceDead(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, healTimeout)
	defer cancel()
	d.dropped.Add(1)
	d.timeoutMu.Lock()
	defer d.timeoutMu.Unlock()
	var req ReconfigureRequest
	prev := d.Timeout()
	raised := false
	if d.policy != nil {
		req.Timeout, raised = d.policy.onDrop(time.Now())
	}
	conns, err := d.offerSockets(ctx, 1, req)
	for _, c := range conns {
		d.serve(c)
	}
	n := len(conns)
	if raised && err == nil {
		d.curTimeout.Store(int64(req.Timeout))
		d.log.Info("nbd: request timeout raised: the kernel dropped a connection, a request outlived the timeout",
			"timeout", req.Timeout, "previous", prev, "max_timeout", d.policy.max)
	}
	switch {
	case err != nil:
		d.log.Warn("nbd: replacing a connection the kernel dropped", "err", err)
	case n == 0:
		d.log.Info("nbd: the kernel dropped a connection but took no replacement (already replaced)")
	default:
		d.log.Warn(MsgConnectionReplaced, "conns", d.Conns())
		if d.replaced != nil {
			d.replaced()
		}
	}
}
