package osdc

import (
	"context"
	"fmt"
	"time"
)

// eagainRetryDelay is how long a request answered with EAGAIN waits
// before it is sent again.
const eagainRetryDelay = 100 * time.Millisecond

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
	case r.Result == -int32(EAGAIN) && op.b.flags&(FlagLocalizeReads|FlagBalanceReads) != 0:
		// a replica that cannot serve the read (an object with writes
		// in flight): the primary, at once, as Ceph's objecter does
		o.stats.eagain.Add(1)
		op.b.flags &^= FlagLocalizeReads | FlagBalanceReads
		op.hasTarget = false
		sends.add(op, o.placeLocked(op, o.osdmap.Load()))
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
		sends.add(op, o.placeLocked(op, o.osdmap.Load()))
	default:
		op.finishLocked(r, nil)
	}
	op.mu.Unlock()
	o.sendAsync(sends)
}

// retryLater sends op again after a short pause (EAGAIN).
func (o *Objecter) retryLater(op *op) {
	o.spawn(func() {
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
		if out.conn != nil {
			_ = out.conn.Send(out.ctx, out.msg)
		}
	})
}

// checkPool decides the fate of a request for a pool the map does not
// have: it asks the monitors for their newest epoch, waits for that map,
// and fails the request if the pool is still missing.
func (o *Objecter) checkPool(op *op) {
	o.spawn(func() {
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
			sends.add(op, o.placeLocked(op, o.osdmap.Load()))
			if op.tErr != nil {
				op.finishLocked(nil, op.tErr)
			}
		}
		op.mu.Unlock()
		sends.send()
	})
}
