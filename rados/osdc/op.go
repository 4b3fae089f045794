package osdc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
	"github.com/purerbd/purerbd/rados/osdmap"
)

// osdEntity is the peer type of OSD sessions.
const osdEntity = denc.EntityTypeOSD

// eagainRetryDelay is how long a request answered with EAGAIN waits
// before it is sent again.
const eagainRetryDelay = 100 * time.Millisecond

// Request is one request: operations on one object (or one placement
// group), which the OSD executes atomically and in order.
type Request struct {
	Pool      int64
	Namespace string
	Key       string // locator key: placement by Key instead of OID
	OID       string
	// PG addresses a placement group instead of an object (listing):
	// its Seed is the placement group; OID stays empty.
	PG  *denc.PG
	Ops []OSDOp
	// Flags are extra Flag* bits. FlagRead and FlagWrite are derived from
	// the operations when neither is given; give FlagWrite for class
	// calls that write.
	Flags uint32
	// SnapID is the snapshot to read (0: SnapHead, the live object).
	SnapID uint64
	// SnapContext is the writer's snapshot context (self-managed
	// snapshots); pools with pool snapshots use their own.
	SnapContext denc.SnapContext
	// MTime is the modification time writes record (zero: now).
	MTime time.Time
}

// Reply is an OSD's answer to a request.
type Reply struct {
	// Ops are the request's operations with their results (RVal) and
	// output (OutData).
	Ops    []OSDOp
	Result int32
	// Version is the object's user version after the request.
	Version uint64
	Epoch   uint32
	// OSD is the OSD that answered.
	OSD int32
}

// op is one request in flight.
type op struct {
	o     *Objecter
	tid   uint64
	ctx   context.Context
	b     base
	ops   []OSDOp
	snap  uint64
	snapc denc.SnapContext
	mtime denc.UTime
	// noResend marks requests that must not be sent twice (watch
	// pings): a placement change or session reset fails them instead.
	noResend bool
	done     chan struct{}

	mu        sync.Mutex
	t         target
	hasTarget bool
	tErr      error    // why the request cannot be placed (pool missing)
	sess      *session // nil while homeless
	homeless  bool
	attempts  int32
	sentConn  *msgr.Conn // the connection the last attempt went out on
	finished  bool
	reply     *MOSDOpReply
	replyOSD  int32
	replyConn *msgr.Conn
	err       error
}

// errSuperseded fails a noResend request whose placement changed.
var errSuperseded = errors.New("osdc: request superseded by a placement change")

// Do sends req and waits for its reply. A negative result is returned as
// an *OpError (wrapping the Errno) together with the reply, whose
// operations carry their individual results. Cancelling ctx abandons the
// request.
func (o *Objecter) Do(ctx context.Context, req *Request) (*Reply, error) {
	op, err := o.newOp(ctx, req)
	if err != nil {
		return nil, err
	}
	o.stats.requests.Add(1)
	return o.run(op)
}

// run submits op and waits for it.
func (o *Objecter) run(op *op) (*Reply, error) {
	o.submit(op)
	select {
	case <-op.done:
	case <-op.ctx.Done():
		op.mu.Lock()
		op.finishLocked(nil, op.ctx.Err())
		op.mu.Unlock()
	}
	if op.err != nil {
		return nil, fmt.Errorf("osdc: %s: %w", op.describe(), op.err)
	}
	r := op.reply
	rep := &Reply{Ops: r.Ops, Result: r.Result, Version: r.UserVersion, Epoch: r.Epoch, OSD: op.replyOSD}
	if r.Result < 0 {
		e := &OpError{Op: op.describe(), Errno: errnoOf(r.Result), OpIdx: -1}
		for i := range r.Ops {
			if r.Ops[i].RVal < 0 {
				e.OpIdx = i
				break
			}
		}
		return rep, e
	}
	return rep, nil
}

// newOp validates req and makes an op of it.
func (o *Objecter) newOp(ctx context.Context, req *Request) (*op, error) {
	if len(req.Ops) == 0 {
		return nil, errors.New("osdc: request without operations")
	}
	if len(req.Ops) > 0xffff {
		return nil, fmt.Errorf("osdc: %d operations in one request (at most 65535)", len(req.Ops))
	}
	if req.PG == nil && req.OID == "" {
		return nil, errors.New("osdc: request without an object name")
	}
	flags := req.Flags
	if flags&(FlagRead|FlagWrite) == 0 {
		for i := range req.Ops {
			if req.Ops[i].Code.IsWrite() {
				flags |= FlagWrite
			} else if req.Ops[i].Code.IsRead() {
				flags |= FlagRead
			}
		}
	}
	if req.PG != nil {
		flags |= FlagPGOp | FlagRead | FlagIgnoreOverlay
	}
	op := &op{
		o:     o,
		tid:   o.lastTid.Add(1),
		ctx:   ctx,
		ops:   req.Ops,
		snap:  req.SnapID,
		snapc: req.SnapContext,
		done:  make(chan struct{}),
	}
	if op.snap == 0 {
		op.snap = SnapHead
	}
	op.b = base{oloc: denc.ObjectLocator{Pool: req.Pool, Namespace: req.Namespace, Key: req.Key, Hash: -1}, oid: req.OID, flags: flags}
	if req.Key == req.OID {
		op.b.oloc.Key = ""
	}
	if req.PG != nil {
		pg := *req.PG
		op.b.pg = &pg
		op.b.oloc.Key = ""
	}
	if flags&FlagWrite != 0 {
		t := req.MTime
		if t.IsZero() {
			t = time.Now()
		}
		op.mtime = denc.UTimeOf(t)
	}
	return op, nil
}

// describe names the request for errors: "write+setxattr obj".
func (op *op) describe() string {
	names := make([]string, 0, len(op.ops))
	for i := range op.ops {
		names = append(names, op.ops[i].Code.String())
	}
	what := op.b.oid
	if op.b.pg != nil {
		what = fmt.Sprintf("pg %d.%x", op.b.oloc.Pool, op.b.pg.Seed)
	}
	return strings.Join(names, "+") + " " + what
}

// submit places a new request and sends it from the caller's goroutine.
func (o *Objecter) submit(op *op) {
	if o.closed() {
		op.mu.Lock()
		op.finishLocked(nil, ErrClosed)
		op.mu.Unlock()
		return
	}
	var sends sendBatch
	op.mu.Lock()
	for {
		m := o.osdmap.Load()
		o.placeLocked(op, m, &sends, true)
		// A map installed while we placed the request may have been
		// scanned before the request was attached: check again.
		if op.finished || o.osdmap.Load() == m {
			break
		}
	}
	op.mu.Unlock()
	sends.send()
}

// placeLocked (re)targets op under m: attaches it to the session of its
// primary and queues it for sending when its placement is new or changed;
// parks it as homeless when it cannot go anywhere yet. Callers hold op.mu.
func (o *Objecter) placeLocked(op *op, m *osdmap.OSDMap, sends *sendBatch, initial bool) {
	if op.finished {
		return
	}
	if m == nil {
		o.parkLocked(op)
		o.requestMap()
		return
	}
	t, err := calcTarget(m, &op.b, o.mappings(m))
	if err != nil {
		firstMiss := op.tErr == nil
		op.tErr = err
		o.parkLocked(op)
		if errors.Is(err, ErrPoolEIO) {
			op.finishLocked(nil, err)
			return
		}
		if firstMiss {
			o.checkPool(op)
		}
		return
	}
	op.tErr = nil
	if op.hasTarget && !op.homeless && op.sess != nil && !op.t.needsResend(&t) {
		return
	}
	if op.noResend && op.attempts > 0 {
		op.finishLocked(nil, errSuperseded)
		return
	}
	op.t, op.hasTarget = t, true
	if t.osd < 0 || t.paused {
		o.parkLocked(op)
		if t.osd < 0 {
			o.requestMap()
		}
		return
	}
	s, err := o.session(t.osd)
	if err != nil {
		op.finishLocked(nil, err)
		return
	}
	o.attachLocked(op, s)
	op.sentConn = nil
	sends.add(op, op.prepareLocked())
}

// attachLocked moves op to session s. Callers hold op.mu.
func (o *Objecter) attachLocked(op *op, s *session) {
	if op.sess == s && !op.homeless {
		return
	}
	op.detachLocked()
	for !s.addOp(op) {
		// s closed (idle, OSD down) between lookup and attach.
		ns, err := o.sessionSlow(s.osd)
		if err != nil {
			op.finishLocked(nil, err)
			return
		}
		s = ns
	}
	op.sess = s
}

// parkLocked makes op homeless: it waits for a map that lets it go.
func (o *Objecter) parkLocked(op *op) {
	if op.homeless {
		return
	}
	op.detachLocked()
	o.homeMu.Lock()
	o.homeless[op.tid] = op
	o.homeMu.Unlock()
	op.homeless = true
}

// detachLocked removes op from its session or the homeless set.
func (op *op) detachLocked() {
	if op.sess != nil {
		op.sess.removeOp(op.tid)
		op.sess = nil
	}
	if op.homeless {
		op.o.homeMu.Lock()
		delete(op.o.homeless, op.tid)
		op.o.homeMu.Unlock()
		op.homeless = false
	}
}

// finishLocked completes op once, with a reply or an error.
func (op *op) finishLocked(r *MOSDOpReply, err error) {
	if op.finished {
		return
	}
	if op.sess != nil {
		op.replyOSD = op.sess.osd
	}
	op.replyConn = op.sentConn
	op.finished = true
	op.detachLocked()
	op.reply, op.err = r, err
	close(op.done)
}

// prepareLocked encodes the next attempt of op for its session's current
// connection; nil when there is nothing to send (no connection yet,
// already sent on it, held back by a backoff or a pause).
func (op *op) prepareLocked() *outgoing {
	s := op.sess
	if s == nil || op.finished || op.t.paused {
		return nil
	}
	conn := s.sendable(op)
	if conn == nil || conn == op.sentConn {
		return nil
	}
	flags := op.b.flags | FlagKnownRedir | FlagSupportsPoolEIO | FlagOnDisk
	if op.attempts > 0 {
		flags |= FlagRetry
	}
	features := op.o.cfg.Features
	if features == 0 {
		features = msgr.DefaultFeatures
	}
	oloc := op.t.oloc
	oloc.Hash = -1
	if op.b.oid == "" {
		oloc.Key = ""
		oloc.Hash = int64(op.t.rawPG.Seed)
	}
	m := &MOSDOp{
		Tid:          op.tid,
		PGID:         op.t.spg,
		Hash:         op.t.rawPG.Seed,
		Epoch:        max(op.o.Epoch(), op.t.epoch),
		Flags:        flags,
		MTime:        op.mtime,
		Oloc:         oloc,
		OID:          op.b.oid,
		Ops:          op.ops,
		SnapID:       op.snap,
		SnapSeq:      op.snapc.Seq,
		Snaps:        op.snapc.Snaps,
		RetryAttempt: op.attempts,
		Features:     features,
	}
	op.o.stats.sends.Add(1)
	if op.attempts > 0 {
		op.o.stats.resends.Add(1)
	}
	op.attempts++
	op.sentConn = conn
	return &outgoing{conn: conn, msg: m.Message(), ctx: op.ctx}
}

// outgoing is one message to send on one connection.
type outgoing struct {
	conn *msgr.Conn
	msg  *msgr.Message
	ctx  context.Context
}

// sendBatch collects messages prepared under locks, to send after
// releasing them.
type sendBatch []*outgoing

func (b *sendBatch) add(_ *op, out *outgoing) {
	if out != nil {
		*b = append(*b, out)
	}
}

// send sends the batch from the calling goroutine. Errors need no
// handling here: a failed connection makes its session reconnect and
// resend, and a cancelled request is already finished.
func (b sendBatch) send() {
	for _, out := range b {
		_ = out.conn.Send(out.ctx, out.msg)
	}
}

// sendAsync sends a batch from a goroutine of its own.
func (o *Objecter) sendAsync(b sendBatch) {
	if len(b) == 0 {
		return
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		b.send()
	}()
}

// handleReply matches a reply to its request on session s.
func (o *Objecter) handleReply(s *session, r *MOSDOpReply) {
	op := s.lookupOp(r.Tid)
	if op == nil {
		o.log.Debug("osdc: reply for unknown request", "tid", r.Tid, "osd", s.osd)
		return
	}
	if r.Epoch > o.Epoch() {
		o.requestMap()
	}
	var sends sendBatch
	op.mu.Lock()
	switch {
	case op.finished || op.sess != s:
	case r.RetryAttempt >= 0 && r.RetryAttempt != op.attempts-1:
		o.log.Debug("osdc: reply to an earlier attempt", "tid", r.Tid, "attempt", r.RetryAttempt, "attempts", op.attempts)
	case r.Result == -int32(EAGAIN) && !op.noResend:
		o.stats.eagain.Add(1)
		op.sentConn = nil
		o.retryLater(op)
	case r.Redirect != nil:
		o.stats.redirects.Add(1)
		red := r.Redirect
		op.b.oloc.Pool = red.Oloc.Pool
		if red.Oloc.Namespace != "" {
			op.b.oloc.Namespace = red.Oloc.Namespace
		}
		if red.Oloc.Key != "" {
			op.b.oloc.Key = red.Oloc.Key
		}
		if red.OID != "" {
			op.b.oid = red.OID
		}
		op.b.flags |= FlagRedirected | FlagIgnoreCache | FlagIgnoreOverlay
		op.hasTarget = false
		o.placeLocked(op, o.osdmap.Load(), &sends, false)
	default:
		op.finishLocked(r, nil)
	}
	op.mu.Unlock()
	o.sendAsync(sends)
}

// retryLater sends op again after a short pause (EAGAIN).
func (o *Objecter) retryLater(op *op) {
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		t := time.NewTimer(eagainRetryDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-op.done:
			return
		case <-o.ctx.Done():
			return
		}
		op.mu.Lock()
		out := op.prepareLocked()
		op.mu.Unlock()
		if out != nil {
			_ = out.conn.Send(out.ctx, out.msg)
		}
	}()
}

// checkPool decides the fate of a request for a pool the map does not
// have: it asks the monitors for their newest epoch, waits for that map,
// and fails the request if the pool is still missing.
func (o *Objecter) checkPool(op *op) {
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		ctx, cancel := context.WithCancel(op.ctx)
		defer cancel()
		stop := context.AfterFunc(o.ctx, cancel)
		defer stop()
		fail := func(err error) {
			op.mu.Lock()
			op.finishLocked(nil, err)
			op.mu.Unlock()
		}
		if o.cfg.Maps == nil {
			op.mu.Lock()
			err := op.tErr
			op.mu.Unlock()
			if err != nil {
				fail(err)
			}
			return
		}
		latest, err := o.cfg.Maps.LatestOSDMapEpoch(ctx)
		if err != nil {
			fail(fmt.Errorf("asking the monitors for the newest OSD map: %w", err))
			return
		}
		if err := o.WaitForMap(ctx, latest); err != nil {
			fail(err)
			return
		}
		var sends sendBatch
		op.mu.Lock()
		if !op.finished && op.tErr != nil {
			o.placeLocked(op, o.osdmap.Load(), &sends, false)
			if op.tErr != nil {
				op.finishLocked(nil, op.tErr)
			}
		}
		op.mu.Unlock()
		sends.send()
	}()
}
