package osdc

import (
	"context"
	"fmt"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
)

// WatchEvent is what a watch receives: a notification, or (Err set) the
// loss of the watch. After an error the watch receives nothing more;
// close it and watch again.
type WatchEvent struct {
	NotifyID    uint64
	NotifierGID uint64
	Payload     []byte
	Err         error
}

// WatchRequest says which object to watch.
type WatchRequest struct {
	Pool      int64
	Namespace string
	Key       string
	OID       string
	// Timeout is how long the OSD keeps the watch without hearing from
	// us (0: the OSD's osd_client_watch_timeout, 30 s).
	Timeout     time.Duration
	SnapContext denc.SnapContext
}

// Watch is a registered watch.
type Watch struct {
	l *linger
}

// Cookie returns the watch's cookie (its id on the OSD).
func (w *Watch) Cookie() uint64 { return w.l.cookie }

// Events delivers notifications (which must be acknowledged with Ack)
// and errors. It is closed when the watch is closed.
func (w *Watch) Events() <-chan WatchEvent { return w.l.events.out }

// Err returns the error that ended the watch, or nil while it is fine.
func (w *Watch) Err() error {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	return w.l.lastErr
}

// Watch registers a watch on an object. Notifications and errors arrive
// on the returned Watch's Events channel; the watch is re-registered
// after session resets and placement changes and confirmed with pings.
func (o *Objecter) Watch(ctx context.Context, req WatchRequest) (*Watch, error) {
	l := o.newLinger(true, req.Pool, req.Namespace, req.Key, req.OID)
	l.timeout = uint32(req.Timeout / time.Second)
	l.snapc = req.SnapContext
	l.b.flags = FlagWrite | FlagRead
	l.events = newEventQueue()
	if !o.register(l) {
		return nil, ErrClosed
	}
	op, err := o.newOp(ctx, l.request(WatchOp(l.cookie, WatchOpWatch, 0, l.timeout)))
	if err == nil {
		_, err = o.run(op)
	}
	if err != nil {
		o.dropLinger(l)
		l.events.close()
		return nil, err
	}
	l.mu.Lock()
	l.registered = true
	l.adoptLocked(op)
	l.mu.Unlock()
	l.recheck()
	return &Watch{l: l}, nil
}

// Ack acknowledges a notification, with an optional reply for the
// notifier.
func (w *Watch) Ack(ctx context.Context, notifyID uint64, reply []byte) error {
	l := w.l
	req := l.request(NotifyAck(notifyID, l.cookie, reply))
	req.Flags = FlagRead
	_, err := l.o.Do(ctx, req)
	return err
}

// Close removes the watch from the object and closes Events.
func (w *Watch) Close(ctx context.Context) error {
	l := w.l
	l.mu.Lock()
	if l.canceled {
		l.mu.Unlock()
		return nil
	}
	l.canceled = true
	l.mu.Unlock()
	l.o.dropLinger(l)
	defer l.events.close()
	if l.o.closed() {
		return nil
	}
	_, err := l.o.Do(ctx, l.request(WatchOp(l.cookie, WatchOpUnwatch, 0, 0)))
	return err
}

// handleWatchNotify routes an MWatchNotify to its watch or notify.
func (o *Objecter) handleWatchNotify(w *MWatchNotify) {
	o.lingerMu.Lock()
	l := o.lingers[w.Cookie]
	o.lingerMu.Unlock()
	if l == nil {
		o.log.Debug("osdc: watch-notify for unknown cookie", "cookie", w.Cookie, "opcode", w.Opcode)
		return
	}
	switch w.Opcode {
	case WatchEventDisconnect:
		l.fail(fmt.Errorf("osdc: watch on %s disconnected by the OSD: %w", l.b.oid, ENOTCONN))
	case WatchEventNotifyComplete:
		if l.complete != nil {
			select {
			case l.complete <- w:
			default:
			}
		}
	case WatchEventNotify:
		if l.events != nil {
			l.events.push(WatchEvent{NotifyID: w.NotifyID, NotifierGID: w.NotifierGID, Payload: append([]byte(nil), w.Payload...)})
		}
	default:
		o.log.Debug("osdc: unknown watch event", "opcode", w.Opcode, "cookie", w.Cookie)
	}
}
