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
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		l.events.pump(o.ctx)
	}()
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

// NotifyRequest says which object's watchers to notify and with what.
type NotifyRequest struct {
	Pool      int64
	Namespace string
	Key       string
	OID       string
	Payload   []byte
	// Timeout is how long the OSD waits for acknowledgements (0: 10 s,
	// librados' client_notify_timeout).
	Timeout time.Duration
}

// NotifyResult is the outcome of a notify: the watchers' replies and the
// watchers that did not answer in time.
type NotifyResult struct {
	Acks     []NotifyReply
	TimedOut []WatcherID
}

// Notify notifies the object's watchers and waits until every one has
// acknowledged or the timeout has passed. When some watchers timed out,
// the result comes with an *OpError for ETIMEDOUT.
func (o *Objecter) Notify(ctx context.Context, req NotifyRequest) (*NotifyResult, error) {
	l := o.newLinger(false, req.Pool, req.Namespace, req.Key, req.OID)
	l.b.flags = FlagRead
	l.complete = make(chan *MWatchNotify, 4)
	l.resend = make(chan struct{}, 1)
	defer o.dropLinger(l)
	timeout := uint32(req.Timeout / time.Second)
	if timeout == 0 {
		timeout = 10
	}
	for {
		op, err := o.newOp(ctx, l.request(Notify(l.cookie, timeout, req.Payload)))
		if err != nil {
			return nil, err
		}
		rep, err := o.run(op)
		if err != nil {
			return nil, err
		}
		id, err := ParseNotifyID(rep.Ops[0].OutData)
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		l.registered = true
		l.adoptLocked(op)
		l.mu.Unlock()
		l.recheck()
		res, done, err := l.waitComplete(ctx, id)
		if done {
			return res, err
		}
	}
}

// waitComplete waits for the completion of notify id; done is false when
// the notify must be sent again.
func (l *linger) waitComplete(ctx context.Context, id uint64) (*NotifyResult, bool, error) {
	for {
		select {
		case w := <-l.complete:
			if w.NotifyID != id {
				continue
			}
			acks, timedOut, err := DecodeNotifyAcks(w.Data)
			if err != nil {
				return nil, true, err
			}
			res := &NotifyResult{Acks: acks, TimedOut: timedOut}
			if w.ReturnCode < 0 {
				return res, true, &OpError{Op: "notify " + l.b.oid, Errno: errnoOf(w.ReturnCode), OpIdx: -1}
			}
			return res, true, nil
		case <-l.resend:
			return nil, false, nil
		case <-ctx.Done():
			return nil, true, fmt.Errorf("osdc: notify %s: %w", l.b.oid, ctx.Err())
		case <-l.o.ctx.Done():
			return nil, true, ErrClosed
		}
	}
}

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
	o.lingerMu.Lock()
	o.lingers[l.cookie] = l
	o.lingerMu.Unlock()
	return l
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
	t, err := calcTarget(m, &l.b, l.o.mappings(m))
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
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
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
	}()
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
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
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
	}()
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

// eventQueue hands watch events to the watcher in order without ever
// blocking the session that received them.
type eventQueue struct {
	mu     sync.Mutex
	q      []WatchEvent
	wake   chan struct{}
	closed chan struct{}
	once   sync.Once
	out    chan WatchEvent
}

func newEventQueue() *eventQueue {
	return &eventQueue{wake: make(chan struct{}, 1), closed: make(chan struct{}), out: make(chan WatchEvent)}
}

func (q *eventQueue) push(ev WatchEvent) {
	q.mu.Lock()
	q.q = append(q.q, ev)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) close() { q.once.Do(func() { close(q.closed) }) }

// pump delivers queued events until the queue or the objecter closes,
// then closes out.
func (q *eventQueue) pump(ctx context.Context) {
	defer close(q.out)
	for {
		q.mu.Lock()
		var ev WatchEvent
		have := len(q.q) > 0
		if have {
			ev = q.q[0]
			q.q = q.q[1:]
		}
		q.mu.Unlock()
		if !have {
			select {
			case <-q.wake:
				continue
			case <-q.closed:
				return
			case <-ctx.Done():
				return
			}
		}
		select {
		case q.out <- ev:
		case <-q.closed:
			return
		case <-ctx.Done():
			return
		}
	}
}
