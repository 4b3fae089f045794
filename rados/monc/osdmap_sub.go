package monc

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/purerbd/purerbd/rados/msgr"
)

// OSDMapSubscription delivers the MOSDMap messages (type MsgOSDMap) the
// monitors send, raw and in order, for the OSDMap decoder of the next
// layer. The client keeps the subscription across monitor failovers,
// asking the new monitor for the epochs after the last one received. A
// subscription buffers what its reader has not taken yet, so a slow
// reader never stalls the monitor session.
type OSDMapSubscription struct {
	c    chan *msgr.Message
	stop chan struct{}
	once sync.Once
	cl   *Client

	mu    sync.Mutex
	queue []*msgr.Message
	wake  chan struct{}
}

// C returns the channel the messages arrive on. It is closed when the
// subscription or the client is closed.
func (s *OSDMapSubscription) C() <-chan *msgr.Message { return s.c }

// Close ends the subscription. The monitors keep sending maps (Ceph has
// no unsubscribe); they are no longer delivered.
func (s *OSDMapSubscription) Close() {
	s.once.Do(func() { close(s.stop) })
	c := s.cl
	c.mu.Lock()
	if c.osdSub == s {
		c.osdSub = nil
		delete(c.subs, "osdmap")
	}
	c.mu.Unlock()
}

// push queues m for the reader.
func (s *OSDMapSubscription) push(m *msgr.Message) {
	s.mu.Lock()
	s.queue = append(s.queue, m)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// pump moves queued messages to the channel until the subscription or
// the client closes.
func (s *OSDMapSubscription) pump(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	defer close(s.c)
	for {
		s.mu.Lock()
		var m *msgr.Message
		if len(s.queue) > 0 {
			m = s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
		}
		s.mu.Unlock()
		if m == nil {
			select {
			case <-s.wake:
				continue
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			}
		}
		select {
		case s.c <- m:
		case <-s.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// SubscribeOSDMap subscribes to OSDMaps from epoch start on: the
// monitors send the incrementals after start-1 (or a full map when they
// no longer have them), then every new epoch. start 0 asks for the
// current full map first. One subscription at a time: close the previous
// one before subscribing again.
func (c *Client) SubscribeOSDMap(start uint32) (*OSDMapSubscription, error) {
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if c.osdSub != nil {
		c.mu.Unlock()
		return nil, errors.New("monc: already subscribed to osdmaps; close that subscription first")
	}
	s := &OSDMapSubscription{c: make(chan *msgr.Message), stop: make(chan struct{}), wake: make(chan struct{}, 1), cl: c}
	c.osdSub = s
	c.subs["osdmap"] = subItem{start: uint64(start)}
	c.wg.Add(1)
	c.mu.Unlock()
	go s.pump(c.ctx, &c.wg)
	c.resubscribe()
	return s, nil
}

// OSDMapEpoch returns the newest osdmap epoch received, 0 for none.
func (c *Client) OSDMapEpoch() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.osdEpoch
}

// osdWaiter is a RequestOSDMap waiting for its map.
type osdWaiter struct {
	epoch uint32
	msg   msgr.Message // the MMonGetOSDMap, resent on a new session
	done  chan osdResult
}

type osdResult struct {
	m   *msgr.Message
	err error
}

// RequestOSDMap asks the monitors for the full OSDMap of epoch (0: the
// newest) and returns the MOSDMap message that carries it, for when the
// incrementals received have a gap. The same message also reaches the
// subscription, if there is one. It fails when the monitors no longer
// (or do not yet) have that epoch.
func (c *Client) RequestOSDMap(ctx context.Context, epoch uint32) (*msgr.Message, error) {
	if epoch == 0 {
		newest, _, err := c.GetVersion(ctx, "osdmap")
		if err != nil {
			return nil, err
		}
		epoch = uint32(newest)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("monc: osdmap %d: %w", epoch, err)
	}
	w := &osdWaiter{
		epoch: epoch,
		msg:   msgr.Message{Type: msgMonGetOSDMap, Version: 1, Front: encodeGetOSDMap(epoch, epoch, 0, 0)},
		done:  make(chan osdResult, 1),
	}
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.osdWaiters[w] = struct{}{}
	conn := c.conn
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.osdWaiters, w)
		c.mu.Unlock()
	}()
	if conn != nil {
		c.send(ctx, conn, w.msg)
	}
	select {
	case r := <-w.done:
		return r.m, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("monc: osdmap %d: %w", epoch, ctx.Err())
	case <-c.ctx.Done():
		return nil, ErrClosed
	}
}

// handleOSDMap tracks the epochs an MOSDMap carries, answers
// RequestOSDMap calls and passes the message to the subscription.
func (c *Client) handleOSDMap(m *msgr.Message) {
	ep, err := decodeOSDMapEpochs(m.Front, m.Version)
	if err != nil {
		c.log.Warn("monc: dropping a malformed osdmap message", "err", err)
		return
	}
	c.mu.Lock()
	if c.monmap != nil && ep.fsid != c.monmap.FSID {
		c.mu.Unlock()
		c.log.Warn("monc: ignoring an osdmap of another cluster", "fsid", ep.fsid.String())
		return
	}
	if last := ep.last(); last > c.osdEpoch {
		c.osdEpoch = last
	}
	if s, ok := c.subs["osdmap"]; ok && ep.last() != 0 {
		if s.flags&subscribeOnetime != 0 {
			delete(c.subs, "osdmap")
		} else if uint64(c.osdEpoch) >= s.start {
			c.subs["osdmap"] = subItem{start: uint64(c.osdEpoch) + 1}
		}
	}
	for w := range c.osdWaiters {
		switch {
		case ep.hasFull(w.epoch):
			w.done <- osdResult{m: m}
			delete(c.osdWaiters, w)
		case ep.last() == 0 && (ep.oldest > w.epoch || (ep.newest != 0 && ep.newest < w.epoch)):
			// an empty answer: the monitors do not have that epoch
			w.done <- osdResult{err: fmt.Errorf("monc: osdmap %d: the monitors hold epochs %d to %d", w.epoch, ep.oldest, ep.newest)}
			delete(c.osdWaiters, w)
		}
	}
	sub := c.osdSub
	c.mu.Unlock()
	if sub != nil {
		sub.push(m)
	}
}
