package msgr

import (
	"context"
	"errors"
	"sync"
)

// ErrNotSent is Settle's answer for a posted message withdrawn before
// the writer took it: none of it was written.
var ErrNotSent = errors.New("msgr: posted message withdrawn before it was written")

// sendQueue holds the messages waiting for the writer goroutine, in the
// order they were queued. A sender appends and goes on (Post) or waits
// for its request's done channel (Send); it does not wait for the
// writer to take the message, so a message costs its sender no hand-off
// to the writer and back.
type sendQueue struct {
	mu   sync.Mutex
	reqs []*sendReq
	// kick has a token while the queue holds requests the writer has
	// not been told of.
	kick chan struct{}
}

func newSendQueue() sendQueue { return sendQueue{kick: make(chan struct{}, 1)} }

// push appends req and tells the writer when the queue was empty.
func (q *sendQueue) push(req *sendReq) {
	q.mu.Lock()
	q.reqs = append(q.reqs, req)
	first := len(q.reqs) == 1
	q.mu.Unlock()
	if first {
		q.signal()
	}
}

func (q *sendQueue) signal() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// len is the number of requests queued.
func (q *sendQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.reqs)
}

// take appends to batch the queued requests, oldest first, up to the
// batch limits, skipping those their senders gave up on; it tells the
// writer again when some are left.
func (q *sendQueue) take(batch []*sendReq) []*sendReq {
	q.mu.Lock()
	size, n := 0, 0
	for _, r := range q.reqs {
		if len(batch) >= maxBatchMsgs || size >= maxBatchBytes {
			break
		}
		n++
		if r.state.CompareAndSwap(sendQueued, sendTaken) {
			batch = append(batch, r)
			size += len(r.m.Front) + len(r.m.Middle) + len(r.m.Data)
		}
	}
	rest := copy(q.reqs, q.reqs[n:])
	clear(q.reqs[rest:])
	q.reqs = q.reqs[:rest]
	q.mu.Unlock()
	if rest > 0 {
		q.signal()
	}
	return batch
}

// Posted is a message queued by Post: the caller keeps its buffers
// unchanged until Settle has returned.
type Posted struct {
	req *sendReq
}

// Post queues m for the writer and returns without waiting for it to be
// written; its seq is set when it is. Messages posted or sent one after
// the other go out in that order. A message marked Alone, with nothing
// queued and no other Send or Post in progress, is written at once by
// the caller, as Send does.
//
// The message's buffers belong to the connection until Settle returns.
// A write error fails the connection; the caller learns of it from Done
// or Err, or from the reply that never comes.
func (c *Conn) Post(ctx context.Context, m *Message) Posted {
	p, _ := c.post(ctx, m)
	return p
}

// post queues m, or writes it at once when it is marked Alone, nothing is
// queued and no other Send or Post is in progress; then the Posted is
// empty and the error is the write's.
func (c *Conn) post(ctx context.Context, m *Message) (Posted, error) {
	defer c.senders.Add(-1)
	alone := c.senders.Add(1) == 1 && m.Alone
	req := c.newReq(m)
	if alone && c.tryDirect() {
		err := c.sendDirect(ctx, req)
		c.recycle(req)
		return Posted{}, err
	}
	req.state.Store(sendQueued)
	c.sendq.push(req)
	return Posted{req: req}, nil
}

// Settle takes back the buffers of a posted message: it withdraws the
// message if the writer has not taken it yet, and otherwise waits until
// its write has ended (bounded by Config.WriteTimeout). It returns the
// write's error, or ErrNotSent for a message withdrawn unwritten. A
// Posted is settled once.
func (c *Conn) Settle(p Posted) error {
	req := p.req
	if req == nil {
		return nil
	}
	if req.state.CompareAndSwap(sendQueued, sendCanceled) {
		// not reused: the writer may still look at it in the queue
		return ErrNotSent
	}
	err := <-req.done
	c.recycle(req)
	return err
}

// tryDirect takes the write lock for a message written by its sender,
// when no message is queued before it (which the writer would otherwise
// write after it). The writer takes the queued messages while it holds
// the lock, so with the lock held and the queue empty every message
// queued earlier has been written.
func (c *Conn) tryDirect() bool {
	if !c.wmu.TryLock() {
		return false
	}
	if c.sendq.len() > 0 {
		c.wmu.Unlock()
		return false
	}
	return true
}
