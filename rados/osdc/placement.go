package osdc

import (
	"errors"

	"github.com/purerbd/purerbd/rados/osdmap"
)

// submit places a new request and sends it from the caller's goroutine:
// the first message is posted (run settles it), so that the caller waits
// once, for the reply, and not also for the writer.
func (o *Objecter) submit(op *op) {
	if o.closed() {
		op.mu.Lock()
		op.finishLocked(nil, ErrClosed)
		op.mu.Unlock()
		return
	}
	var first outgoing // the usual case, without an allocation
	var more sendBatch
	op.mu.Lock()
	for {
		m := o.osdmap.Load()
		if out := o.placeLocked(op, m); first.conn == nil {
			first = out
		} else {
			more.add(op, out)
		}
		// A map installed while we placed the request may have been
		// scanned before the request was attached: check again.
		if op.finished || o.osdmap.Load() == m {
			break
		}
	}
	op.mu.Unlock()
	if first.conn != nil {
		op.posted, op.postedOn = first.conn.Post(first.ctx, first.msg), first.conn
	}
	more.send()
}

// placeLocked (re)targets op under m: attaches it to the session of its
// primary and returns the message to send when its placement is new or
// changed; parks it as homeless when it cannot go anywhere yet. Callers
// hold op.mu and send what it returns once they released it.
func (o *Objecter) placeLocked(op *op, m *osdmap.OSDMap) outgoing {
	if op.finished {
		return outgoing{}
	}
	if m == nil {
		o.parkLocked(op)
		o.requestMap()
		return outgoing{}
	}
	t, err := calcTarget(m, &op.b, o.mappings(m), o.cfg.CrushLocation)
	if err != nil {
		firstMiss := op.tErr == nil
		op.tErr = err
		o.parkLocked(op)
		if errors.Is(err, ErrPoolEIO) {
			op.finishLocked(nil, err)
			return outgoing{}
		}
		if firstMiss {
			o.checkPool(op)
		}
		return outgoing{}
	}
	op.tErr = nil
	if op.hasTarget && !op.homeless && op.sess != nil && !op.t.needsResend(&t) {
		return outgoing{}
	}
	if op.noResend && op.attempts > 0 {
		op.finishLocked(nil, errSuperseded)
		return outgoing{}
	}
	op.t, op.hasTarget = t, true
	if t.osd < 0 || t.paused {
		o.parkLocked(op)
		if t.osd < 0 {
			o.requestMap()
		}
		return outgoing{}
	}
	s, err := o.session(t.osd)
	if err != nil {
		op.finishLocked(nil, err)
		return outgoing{}
	}
	o.attachLocked(op, s)
	op.sentConn = nil
	return op.prepareLocked()
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
