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
)

// osdEntity is the peer type of OSD sessions.
const osdEntity = denc.EntityTypeOSD

// Request is one request: operations on one object (or one placement
// group), which the OSD executes atomically and in order. The
// operations' InData are sent without copying (and resent as needed):
// they must not change until Do returns.
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
	// OutBuf, when not nil, receives the reply's data segment (the
	// operations' OutData end to end; for a single Read, the bytes
	// read) straight from the connection when it fits, sparing a zeroed
	// allocation and a copy: the reply's OutData then alias OutBuf.
	// Whether it was used or not, the OutData are correct; OutBuf's
	// contents are undefined after an error. It must not be touched
	// until Do returns. (crc-mode sessions only.)
	OutBuf []byte
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
	outBuf   []byte // Request.OutBuf
	done     chan struct{}
	rep      Reply // what run returns
	// posted is the first attempt's message, queued on postedOn by
	// submit without waiting for its write; run settles it before it
	// returns, so the caller's buffers are its own again. Only run's
	// goroutine touches them.
	posted   msgr.Posted
	postedOn *msgr.Conn

	mu        sync.Mutex
	t         target
	hasTarget bool
	tErr      error    // why the request cannot be placed (pool missing)
	sess      *session // nil while homeless
	homeless  bool
	attempts  int32
	sentConn  *msgr.Conn // the connection the last attempt went out on
	rxConn    *msgr.Conn // the connection outBuf is registered with
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
	case <-o.ctx.Done():
		// Close fails what it finds; this catches a request placed
		// after Close collected the waiting ones.
		op.mu.Lock()
		op.finishLocked(nil, ErrClosed)
		op.mu.Unlock()
	}
	if op.postedOn != nil {
		_ = op.postedOn.Settle(op.posted)
		op.postedOn = nil
	}
	op.withdrawBuf()
	if op.err != nil {
		return nil, fmt.Errorf("osdc: %s: %w", op.describe(), op.err)
	}
	r := op.reply
	op.rep = Reply{Ops: r.Ops, Result: r.Result, Version: r.UserVersion, Epoch: r.Epoch, OSD: op.replyOSD}
	rep := &op.rep
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
		o:      o,
		tid:    o.lastTid.Add(1),
		ctx:    ctx,
		ops:    req.Ops,
		snap:   req.SnapID,
		snapc:  req.SnapContext,
		outBuf: req.OutBuf,
		done:   make(chan struct{}),
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

// registerBufLocked registers op's OutBuf for the reply on conn, the
// connection the next attempt goes out on, after taking it back from
// the previous one. Callers hold op.mu.
func (op *op) registerBufLocked(conn *msgr.Conn) {
	if op.outBuf == nil {
		return
	}
	if op.rxConn != nil && op.rxConn != conn {
		op.rxConn.Withdraw(op.tid)
	}
	conn.RecvInto(op.tid, MsgOSDOpReply, op.outBuf)
	op.rxConn = conn
}

// withdrawBuf takes op's OutBuf back from the connection once op is
// finished (prepareLocked registers nothing after that), so the caller
// owns it again when run returns.
func (op *op) withdrawBuf() {
	if op.outBuf == nil {
		return
	}
	op.mu.Lock()
	conn := op.rxConn
	op.rxConn = nil
	op.mu.Unlock()
	if conn != nil {
		conn.Withdraw(op.tid)
	}
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
