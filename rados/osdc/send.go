package osdc

import (
	"context"

	"github.com/purerbd/purerbd/rados/msgr"
)

// prepareLocked encodes the next attempt of op for its session's current
// connection; the zero outgoing when there is nothing to send (no
// connection yet, already sent on it, held back by a backoff or a pause).
func (op *op) prepareLocked() outgoing {
	s := op.sess
	if s == nil || op.finished || op.t.paused {
		return outgoing{}
	}
	conn, alone := s.sendable(op)
	if conn == nil || conn == op.sentConn {
		return outgoing{}
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
	m := MOSDOp{
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
	op.registerBufLocked(conn)
	msg := op.o.message(&m)
	// the only op in flight to this OSD: Send writes it itself rather
	// than waking the connection's writer (msgr.Message.Alone)
	msg.Alone = alone
	return outgoing{conn: conn, msg: msg, ctx: op.ctx}
}

// outgoing is one message to send on one connection (none when conn is
// nil).
type outgoing struct {
	conn *msgr.Conn
	msg  *msgr.Message
	ctx  context.Context
}

// sendBatch collects messages prepared under locks, to send after
// releasing them.
type sendBatch []outgoing

func (b *sendBatch) add(_ *op, out outgoing) {
	if out.conn != nil {
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
	o.spawn(b.send)
}

// message encodes m for the messenger, its data sent by reference only
// where Config.SpliceWrites asks for it.
func (o *Objecter) message(m *MOSDOp) *msgr.Message {
	msg := m.Message()
	msg.SpliceData = msg.SpliceData && o.cfg.SpliceWrites
	return msg
}
