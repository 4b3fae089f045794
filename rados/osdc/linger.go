package osdc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
	"github.com/purerbd/purerbd/rados/osdmap"
)

// lingerOpTimeout bounds the background requests of a watch
// (re-registration, pings).
const lingerOpTimeout = 30 * time.Second

// linger is a watch or a notify in progress: Ceph's LingerOp. It stays
// attached to the session of the OSD that holds it, so that a session
// reset or a placement change re-registers the watch (or resends the
// notify).
//
// The fields above mu are set before register and never change after.
type linger struct {
	o       *Objecter
	cookie  uint64
	b       base
	watch   bool
	timeout uint32
	snapc   denc.SnapContext

	mu           sync.Mutex
	sess         *session
	conn         *msgr.Conn // the connection the registration answered on
	t            target
	registered   bool
	gen          uint32
	reconnecting bool
	canceled     bool
	lastErr      error

	events   *eventQueue        // watches
	complete chan *MWatchNotify // notifies: NOTIFY_COMPLETE
	resend   chan struct{}      // notifies: send again
}

// newLinger returns a watch or notify on an object, not yet known to
// the objecter: the caller completes it, then registers it.
func (o *Objecter) newLinger(watch bool, pool int64, ns, key, oid string) *linger {
	l := &linger{
		o:      o,
		cookie: o.lastCookie.Add(1),
		watch:  watch,
		b:      base{oloc: denc.ObjectLocator{Pool: pool, Namespace: ns, Key: key, Hash: -1}, oid: oid},
	}
	if key == oid {
		l.b.oloc.Key = ""
	}
	return l
}

// register makes l known to the objecter (notifications, map changes,
// pings, Close) and starts the delivery of a watch's events. From here
// on the fields set before registering are read by other goroutines
// without l.mu, so they must not change. It fails once Close has begun:
// Close cancels the context before it collects the lingers under
// lingerMu, so a linger is either collected and failed by Close or
// refused here, and no goroutine is added to o.wg after Close waits.
func (o *Objecter) register(l *linger) bool {
	o.lingerMu.Lock()
	defer o.lingerMu.Unlock()
	if o.closed() {
		return false
	}
	if l.events != nil && !o.spawn(func() { l.events.pump(o.ctx) }) {
		return false // Close began after the check above
	}
	o.lingers[l.cookie] = l
	return true
}

// dropLinger forgets l.
func (o *Objecter) dropLinger(l *linger) {
	o.lingerMu.Lock()
	delete(o.lingers, l.cookie)
	o.lingerMu.Unlock()
	l.mu.Lock()
	l.canceled = true
	if l.sess != nil {
		l.sess.removeLinger(l.cookie)
		l.sess = nil
	}
	l.mu.Unlock()
}

// request builds a request on the linger's object.
func (l *linger) request(ops ...OSDOp) *Request {
	return &Request{
		Pool: l.b.oloc.Pool, Namespace: l.b.oloc.Namespace, Key: l.b.oloc.Key, OID: l.b.oid,
		Ops: ops, Flags: l.b.flags, SnapContext: l.snapc,
	}
}

// adoptLocked attaches l where op (its registration) was answered.
func (l *linger) adoptLocked(op *op) {
	op.mu.Lock()
	t, osd, conn := op.t, op.replyOSD, op.replyConn
	op.mu.Unlock()
	l.t, l.conn = t, conn
	if l.sess != nil && l.sess.osd == osd && !l.sess.isClosed() {
		return
	}
	if l.sess != nil {
		l.sess.removeLinger(l.cookie)
		l.sess = nil
	}
	for i := 0; i < 3; i++ {
		s, err := l.o.sessionSlow(osd)
		if err != nil {
			return
		}
		if s.addLinger(l) {
			l.sess = s
			return
		}
	}
}

// recheck re-registers l if its session reset or its placement changed
// since the registration was answered.
func (l *linger) recheck() {
	l.mu.Lock()
	s, conn := l.sess, l.conn
	l.mu.Unlock()
	if s == nil || s.currentConn() != conn {
		l.kick()
		return
	}
	if m := l.o.osdmap.Load(); m != nil {
		l.mapChanged(m)
	}
}

// mapChanged re-registers l when the map moved its object.
func (l *linger) mapChanged(m *osdmap.OSDMap) {
	l.mu.Lock()
	if !l.registered || l.canceled || l.lastErr != nil {
		l.mu.Unlock()
		return
	}
	t, err := calcTarget(m, &l.b, l.o.mappings(m), nil)
	moved := err == nil && l.t.needsResend(&t)
	l.mu.Unlock()
	if err != nil {
		l.fail(fmt.Errorf("osdc: watched object %s: %w", l.b.oid, err))
		return
	}
	if moved {
		l.kick()
	}
}

// sessionReset re-registers l after its session reconnected.
func (l *linger) sessionReset(s *session, conn *msgr.Conn) {
	l.mu.Lock()
	stale := l.sess == s && l.conn != conn
	l.mu.Unlock()
	if stale {
		l.kick()
	}
}

// kick re-registers a watch (RECONNECT) or resends a notify.
func (l *linger) kick() {
	if !l.watch {
		select {
		case l.resend <- struct{}{}:
		default:
		}
		return
	}
	l.mu.Lock()
	if l.canceled || !l.registered || l.lastErr != nil {
		l.mu.Unlock()
		return
	}
	l.gen++
	gen := l.gen
	l.reconnecting = true
	l.mu.Unlock()
	o := l.o
	o.spawn(func() {
		ctx, cancel := context.WithTimeout(o.ctx, lingerOpTimeout)
		defer cancel()
		op, err := o.newOp(ctx, l.request(WatchOp(l.cookie, WatchOpReconnect, gen, l.timeout)))
		if err == nil {
			_, err = o.run(op)
		}
		l.mu.Lock()
		if gen != l.gen || l.canceled {
			l.mu.Unlock()
			return
		}
		l.reconnecting = false
		if err != nil {
			l.mu.Unlock()
			if o.closed() {
				return
			}
			l.fail(watchError(err))
			return
		}
		l.adoptLocked(op)
		l.mu.Unlock()
		o.stats.reconnects.Add(1)
		o.log.Debug("osdc: watch re-registered", "cookie", l.cookie, "oid", l.b.oid, "gen", gen)
		l.recheck()
	})
}

// ping confirms a registered watch.
func (l *linger) ping() {
	l.mu.Lock()
	if !l.watch || !l.registered || l.canceled || l.reconnecting || l.lastErr != nil {
		l.mu.Unlock()
		return
	}
	gen := l.gen
	l.mu.Unlock()
	o := l.o
	o.spawn(func() {
		ctx, cancel := context.WithTimeout(o.ctx, lingerOpTimeout)
		defer cancel()
		op, err := o.newOp(ctx, l.request(WatchOp(l.cookie, WatchOpPing, gen, 0)))
		if err != nil {
			return
		}
		op.noResend = true
		_, err = o.run(op)
		var oe *OpError
		if err == nil || !errors.As(err, &oe) {
			return // fine, or no answer (superseded, timed out, closing)
		}
		l.mu.Lock()
		current := gen == l.gen && !l.reconnecting
		l.mu.Unlock()
		if current {
			l.fail(watchError(err))
		}
	})
}

// watchError turns ENOENT (the object was deleted) into ENOTCONN, as
// librados does, so both ways of losing a watch look alike.
func watchError(err error) error {
	if errors.Is(err, ENOENT) {
		return fmt.Errorf("%w (%w)", ENOTCONN, err)
	}
	return err
}

// fail ends the watch with err (once) and tells the watcher.
func (l *linger) fail(err error) {
	l.mu.Lock()
	if l.lastErr != nil || (l.canceled && !errors.Is(err, ErrClosed)) {
		l.mu.Unlock()
		return
	}
	l.lastErr = err
	l.mu.Unlock()
	if l.events != nil {
		l.events.push(WatchEvent{Err: err})
	}
	if l.complete != nil {
		select {
		case l.resend <- struct{}{}:
		default:
		}
	}
}
