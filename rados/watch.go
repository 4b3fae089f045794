package rados

import (
	"context"
	"time"

	"github.com/purerbd/purerbd/rados/osdc"
)

// NotifyEvent is a notification a watch receives (or, with Err set, the
// loss of the watch).
type NotifyEvent = osdc.WatchEvent

// NotifyResponse is the outcome of a notify: each acknowledging
// watcher's reply, and the watchers that timed out.
type NotifyResponse = osdc.NotifyResult

// WatcherInfo describes one watch on an object.
type WatcherInfo = osdc.Watcher

// Watcher is a watch on an object.
type Watcher struct {
	w  *osdc.Watch
	io *IOContext
}

// Watch watches an object. Notifications arrive on the Watcher's
// Events channel and must be acknowledged with Ack (the notifier waits
// for every watcher). The watch survives OSD restarts and placement
// changes; if it is lost anyway (the object was deleted, the OSD timed
// it out), Events delivers an error: close the watcher and watch again.
func (io *IOContext) Watch(ctx context.Context, oid string) (*Watcher, error) {
	return io.WatchWithTimeout(ctx, oid, 0)
}

// WatchWithTimeout is Watch with the time the OSD keeps the watch
// without hearing from this client (0: the OSD's default, 30 s).
func (io *IOContext) WatchWithTimeout(ctx context.Context, oid string, timeout time.Duration) (*Watcher, error) {
	w, err := io.conn.ob.Watch(ctx, osdc.WatchRequest{Pool: io.pool, Namespace: io.ns, Key: io.key, OID: oid,
		Timeout: timeout, SnapContext: io.snapc})
	if err != nil {
		return nil, err
	}
	return &Watcher{w: w, io: io}, nil
}

// ID returns the watch's cookie.
func (w *Watcher) ID() uint64 { return w.w.Cookie() }

// Events delivers notifications and errors; it is closed by Close.
func (w *Watcher) Events() <-chan NotifyEvent { return w.w.Events() }

// Ack acknowledges notification ev with an optional reply.
func (w *Watcher) Ack(ctx context.Context, ev NotifyEvent, reply []byte) error {
	return w.w.Ack(ctx, ev.NotifyID, reply)
}

// Err returns the error that ended the watch, or nil.
func (w *Watcher) Err() error { return w.w.Err() }

// Close removes the watch.
func (w *Watcher) Close(ctx context.Context) error { return w.w.Close(ctx) }

// Notify sends payload to the object's watchers and waits until all have
// acknowledged or timeout (0: 10 s) has passed; watchers that did not
// answer are listed in the response, which comes with an error matching
// ErrTimedOut.
func (io *IOContext) Notify(ctx context.Context, oid string, payload []byte, timeout time.Duration) (*NotifyResponse, error) {
	return io.conn.ob.Notify(ctx, osdc.NotifyRequest{Pool: io.pool, Namespace: io.ns, Key: io.key, OID: oid,
		Payload: payload, Timeout: timeout})
}

// ListWatchers lists the watches on an object.
func (io *IOContext) ListWatchers(ctx context.Context, oid string) ([]WatcherInfo, error) {
	rep, err := io.do(ctx, oid, 0, osdc.ListWatchers())
	if err != nil {
		return nil, err
	}
	return osdc.ParseWatchers(rep.Ops[0].OutData)
}
