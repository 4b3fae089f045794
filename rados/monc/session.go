package monc

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/purerbd/purerbd/rados/msgr"
)

// errDropped ends a session the client gave up on itself.
var errDropped = errors.New("monc: session dropped to re-authenticate")

// run is the session loop: it serves one monitor session at a time and
// hunts for the next when it ends, until Close.
func (c *Client) run(est established) {
	defer c.wg.Done()
	for {
		c.establish(est)
		conn := est.conn
		reason := c.serve(conn)
		conn.Close()
		if c.ctx.Err() != nil {
			c.lose()
			return
		}
		si := c.Session()
		c.lose()
		c.log.Info("monc: monitor session lost; hunting", "mon", si.Mon, "addr", si.Addr.String(), "err", reason)
		var err error
		if est, err = c.hunt(c.ctx, false); err != nil {
			return // only Close ends a hunt after New
		}
	}
}

// establish makes est the current session, subscribes and resends what
// the previous session left unanswered.
func (c *Client) establish(est established) {
	conn := est.conn
	c.mu.Lock()
	c.conn, c.challenge = conn, est.challenge
	c.sessions++
	if !c.lostAt.IsZero() {
		c.lastFailover = time.Since(c.lostAt)
	}
	failover := c.lastFailover
	sub := c.subscribeMsgLocked()
	var resend []msgr.Message
	for _, r := range c.requests {
		resend = append(resend, r.msg)
	}
	for w := range c.osdWaiters {
		resend = append(resend, w.msg)
	}
	c.renewSent = time.Time{}
	n := c.sessions
	c.mu.Unlock()
	slices.SortFunc(resend, func(a, b msgr.Message) int { return cmp.Compare(a.Tid, b.Tid) })

	log := c.log.Debug
	if n > 1 {
		log = c.log.Info
	}
	log("monc: monitor session established", "mon", conn.PeerAddrs().String(), "mode", conn.Mode().String(),
		"global_id", conn.GlobalID(), "sessions", n, "failover", failover.Round(time.Millisecond), "resent", len(resend))
	c.send(c.ctx, conn, sub)
	for _, m := range resend {
		c.send(c.ctx, conn, m)
	}
}

// lose forgets the current session.
func (c *Client) lose() {
	c.mu.Lock()
	c.conn, c.challenge = nil, 0
	c.lostAt = time.Now()
	c.subRenewAt = time.Time{}
	c.mu.Unlock()
}

// send sends a copy of m on conn (so one request may be in flight on two
// connections). A failure needs no handling here: the session loop sees
// the connection fail and resends on the next one.
func (c *Client) send(ctx context.Context, conn *msgr.Conn, m msgr.Message) {
	if err := conn.Send(ctx, &m); err != nil {
		c.log.Debug("monc: send failed", "type", m.Type, "tid", m.Tid, "err", err)
	}
}

// serve handles conn's messages and the periodic work until the
// connection fails, the client closes or the session is dropped.
func (c *Client) serve(conn *msgr.Conn) error {
	t := time.NewTimer(c.nextTick())
	defer t.Stop()
	for {
		select {
		case m, ok := <-conn.Incoming():
			if !ok {
				return conn.Err()
			}
			c.dispatch(conn, m)
			if m.Type == msgAuthReply {
				t.Reset(c.nextTick())
			}
		case <-t.C:
			c.tick(conn)
			t.Reset(c.nextTick())
		case <-c.kick:
			c.tick(conn)
			t.Reset(c.nextTick())
		case <-c.drop:
			return errDropped
		case <-c.ctx.Done():
			return ErrClosed
		}
	}
}

// dispatch handles one message from the monitor.
func (c *Client) dispatch(conn *msgr.Conn, m *msgr.Message) {
	switch m.Type {
	case msgMonMap:
		c.handleMonMap(m)
	case MsgOSDMap:
		c.handleOSDMap(m)
	case msgMonCommandAck:
		c.handleCommandAck(m)
	case msgMonGetVersionReply:
		c.handleVersionReply(m)
	case msgAuthReply:
		c.handleAuthReply(m)
	case msgMonSubscribeAck:
		c.handleSubscribeAck(m)
	case msgConfig:
		c.handleConfig(m)
	default:
		// the answer to a Request, or nothing we wait for
		if !c.answer(m.Tid, m) {
			c.log.Debug("monc: ignoring message", "type", m.Type, "tid", m.Tid, "from", conn.PeerAddrs().String())
		}
	}
}

// tick renews tickets and, with monitors that need it, subscriptions.
func (c *Client) tick(conn *msgr.Conn) {
	c.renewTickets(conn)
	c.mu.Lock()
	var sub *msgr.Message
	if !c.subRenewAt.IsZero() && time.Now().After(c.subRenewAt) {
		c.subRenewAt = time.Time{}
		m := c.subscribeMsgLocked()
		sub = &m
	}
	c.mu.Unlock()
	if sub != nil {
		c.send(c.ctx, conn, *sub)
	}
}

// handleMonMap keeps a newer MonMap of our cluster.
func (c *Client) handleMonMap(m *msgr.Message) {
	mm, err := decodeMonMapMessage(m.Front)
	if err != nil {
		c.log.Warn("monc: bad monmap from the monitor", "err", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.monmap != nil && mm.FSID != c.monmap.FSID {
		c.log.Warn("monc: ignoring a monmap of another cluster", "fsid", mm.FSID.String(), "want", c.monmap.FSID.String())
		return
	}
	if c.monmap != nil && mm.Epoch < c.monmap.Epoch {
		return
	}
	if c.monmap == nil || mm.Epoch > c.monmap.Epoch {
		c.log.Debug("monc: monmap", "map", mm.String())
	}
	c.monmap = mm
	close(c.monmapChanged)
	c.monmapChanged = make(chan struct{})
	if _, ok := c.subs["monmap"]; ok {
		c.subs["monmap"] = subItem{start: uint64(mm.Epoch) + 1}
	}
}

// handleSubscribeAck notes when subscriptions must be renewed: only
// monitors without stateful subscriptions (before Jewel) send the ack.
func (c *Client) handleSubscribeAck(m *msgr.Message) {
	a, err := decodeSubscribeAck(m.Front)
	if err != nil {
		c.log.Warn("monc: bad subscribe ack", "err", err)
		return
	}
	if a.interval == 0 {
		return
	}
	c.mu.Lock()
	c.subRenewAt = time.Now().Add(time.Duration(a.interval) * time.Second / 2)
	c.mu.Unlock()
}

// handleConfig keeps the central configuration.
func (c *Client) handleConfig(m *msgr.Message) {
	conf, err := decodeConfigMessage(m.Front)
	if err != nil {
		c.log.Warn("monc: bad config message", "err", err)
		return
	}
	c.mu.Lock()
	c.central = conf
	c.mu.Unlock()
}

// subscribeMsgLocked builds the MMonSubscribe for the current
// subscriptions. Callers hold c.mu.
func (c *Client) subscribeMsgLocked() msgr.Message {
	return msgr.Message{
		Type:          msgMonSubscribe,
		Version:       3,
		CompatVersion: 1,
		Front:         encodeSubscribe(c.subs, c.cfg.Hostname),
	}
}

// resubscribe sends the current subscriptions on the session, if any.
func (c *Client) resubscribe() {
	c.mu.Lock()
	conn := c.conn
	m := c.subscribeMsgLocked()
	c.mu.Unlock()
	if conn != nil {
		c.send(c.ctx, conn, m)
	}
}
