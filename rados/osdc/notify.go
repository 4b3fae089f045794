package osdc

import (
	"context"
	"fmt"
	"time"
)

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
	if !o.register(l) {
		return nil, ErrClosed
	}
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
