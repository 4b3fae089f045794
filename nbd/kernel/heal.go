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
		return
	}
	if CurrentNetns("") == NetnsOther {
		// Subscribing worked, but nothing will arrive.
		d.log.Warn("nbd: " + linkDeadProblem)
	}
	ctx := d.healCtx
	done := make(chan struct{})
	d.stopHeal = sync.OnceFunc(func() {
		d.healCancel()
		<-done
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
func (d *Device) replaceDead(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, healTimeout)
	defer cancel()
	n, err := d.offerSockets(ctx, 1, ReconfigureRequest{})
	switch {
	case err != nil:
		d.log.Warn("nbd: replacing a connection the kernel dropped", "err", err)
	case n == 0:
		d.log.Info("nbd: the kernel dropped a connection but took no replacement (already replaced)")
	default:
		d.log.Warn(MsgConnectionReplaced, "conns", d.Conns())
	}
}
