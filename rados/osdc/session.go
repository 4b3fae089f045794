package osdc

import (
	"context"
	"sync"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
	"github.com/purerbd/purerbd/rados/osdmap"
)

// Reconnection pacing for a session whose OSD does not answer.
const (
	minRedialDelay = 50 * time.Millisecond
	maxRedialDelay = 2 * time.Second
)

// session is the objecter's link to one OSD: a msgr connection (opened
// lazily, reopened after failures) and the requests and watches that
// currently target the OSD. Requests are attached and detached under mu;
// the connection is replaced only by run.
type session struct {
	o   *Objecter
	osd int32

	mu       sync.Mutex
	conn     *msgr.Conn // nil while (re)connecting
	addr     denc.EntityAddr
	ops      map[uint64]*op
	lingers  map[uint64]*linger
	backoffs map[uint64]*MOSDBackoff
	closed   bool

	kick   chan struct{} // wakes run: the map changed, or close
	done   chan struct{} // closed when run returns
	ctx    context.Context
	cancel context.CancelFunc // ends a dial in progress at close
}

func newSession(o *Objecter, osd int32) *session {
	ctx, cancel := context.WithCancel(o.ctx)
	return &session{
		ctx:      ctx,
		cancel:   cancel,
		o:        o,
		osd:      osd,
		ops:      map[uint64]*op{},
		lingers:  map[uint64]*linger{},
		backoffs: map[uint64]*MOSDBackoff{},
		kick:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
}

func (s *session) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// addOp attaches op; false if the session is closed.
func (s *session) addOp(op *op) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.ops[op.tid] = op
	return true
}

func (s *session) removeOp(tid uint64) {
	s.mu.Lock()
	delete(s.ops, tid)
	s.mu.Unlock()
}

func (s *session) lookupOp(tid uint64) *op {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ops[tid]
}

// addLinger attaches a watch or notify; false if the session is closed.
func (s *session) addLinger(l *linger) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.lingers[l.cookie] = l
	return true
}

func (s *session) removeLinger(cookie uint64) {
	s.mu.Lock()
	delete(s.lingers, cookie)
	s.mu.Unlock()
}

// currentConn returns the live connection, or nil.
func (s *session) currentConn() *msgr.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

// sendable returns the connection op may be sent on now: nil while
// disconnected or while a backoff covers op's object. alone reports that
// op is the only op in flight on the session (msgr.Message.Alone).
func (s *session) sendable(op *op) (conn *msgr.Conn, alone bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil, false
	}
	if len(s.backoffs) > 0 {
		h := op.t.hobject(op.b.oid)
		for _, b := range s.backoffs {
			if b.PGID == op.t.spg && b.covers(h) {
				return nil, false
			}
		}
	}
	return s.conn, len(s.ops) <= 1
}

// appendOps appends the attached requests to ops.
func (s *session) appendOps(ops []*op) []*op {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, op := range s.ops {
		ops = append(ops, op)
	}
	return ops
}

// mapChanged wakes a session waiting for its OSD to come up, and drops
// a connection to an address the OSD no longer has (it restarted).
func (s *session) mapChanged(m *osdmap.OSDMap) {
	s.poke()
	addr, ok := m.Addrs(s.osd).Msgr2()
	s.mu.Lock()
	conn := s.conn
	stale := conn != nil && (!ok || !addr.SameInstance(s.addr))
	s.mu.Unlock()
	if stale {
		s.o.log.Debug("osdc: OSD address changed; reconnecting", "osd", s.osd, "addr", addr)
		_ = conn.Close()
	}
}

// closeIfIdle closes the session when nothing uses it. Callers hold
// o.sessMu.
func (s *session) closeIfIdle() bool {
	s.mu.Lock()
	idle := len(s.ops) == 0 && len(s.lingers) == 0
	var conn *msgr.Conn
	if idle {
		s.closed = true
		conn = s.conn
	}
	s.mu.Unlock()
	if !idle {
		return false
	}
	s.cancel()
	s.poke()
	if conn != nil {
		_ = conn.Close()
	}
	return true
}

// close closes the session and fails what is attached to it (Close).
func (s *session) close() {
	s.mu.Lock()
	s.closed = true
	conn := s.conn
	ops := make([]*op, 0, len(s.ops))
	for _, op := range s.ops {
		ops = append(ops, op)
	}
	s.mu.Unlock()
	s.cancel()
	s.poke()
	if conn != nil {
		_ = conn.Close()
	}
	s.wait()
	for _, op := range ops {
		op.mu.Lock()
		op.finishLocked(nil, ErrClosed)
		op.mu.Unlock()
	}
}

// wait waits for run to return.
func (s *session) wait() { <-s.done }

func (s *session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// run keeps the session connected while it is open: dial, resend what
// is attached, read until the connection fails, repeat.
func (s *session) run() {
	o := s.o
	defer close(s.done)
	defer s.cancel()
	delay := time.Duration(0)
	for {
		if s.isClosed() || o.closed() {
			return
		}
		if delay > 0 && !s.sleep(delay) {
			continue
		}
		m := o.osdmap.Load()
		if m == nil || !m.IsUp(s.osd) {
			s.sleep(maxRedialDelay) // until the map changes
			continue
		}
		addr, ok := m.Addrs(s.osd).Msgr2()
		if !ok {
			o.log.Warn("osdc: OSD has no msgr2 address", "osd", s.osd, "addrs", m.Addrs(s.osd).String())
			s.sleep(maxRedialDelay)
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, o.cfg.DialTimeout)
		d := &dispatch{s: s}
		cfg := o.msgrConfig()
		cfg.Intercept = d.intercept
		conn, err := msgr.DialAddr(ctx, addr, cfg)
		cancel()
		if err != nil {
			if !o.closed() {
				o.log.Debug("osdc: connecting to OSD failed", "osd", s.osd, "addr", addr, "err", err)
				o.requestMap()
			}
			delay = min(max(2*delay, minRedialDelay), maxRedialDelay)
			continue
		}
		delay = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		s.conn, s.addr = conn, addr
		clear(s.backoffs)
		ops := make([]*op, 0, len(s.ops))
		for _, op := range s.ops {
			ops = append(ops, op)
		}
		lingers := make([]*linger, 0, len(s.lingers))
		for _, l := range s.lingers {
			lingers = append(lingers, l)
		}
		s.mu.Unlock()
		o.log.Debug("osdc: connected to OSD", "osd", s.osd, "addr", addr, "resend", len(ops))
		s.resend(ops)
		for _, l := range lingers {
			l.sessionReset(s, conn)
		}
		s.read(conn, d)
		s.mu.Lock()
		s.conn = nil
		s.mu.Unlock()
		_ = conn.Close()
		if !s.isClosed() && !o.closed() {
			o.stats.resets.Add(1)
			o.log.Debug("osdc: OSD session reset", "osd", s.osd, "err", conn.Err())
			o.requestMap()
			delay = minRedialDelay
		}
	}
}

// sleep waits for d or a kick; false if kicked or closing.
func (s *session) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.kick:
		return false
	case <-s.ctx.Done():
		return false
	}
}

// resend sends the attached requests on the new connection.
func (s *session) resend(ops []*op) {
	var sends sendBatch
	for _, op := range ops {
		op.mu.Lock()
		if op.sess == s && !op.finished {
			if op.noResend && op.attempts > 0 {
				op.finishLocked(nil, errSuperseded)
			} else {
				sends.add(op, op.prepareLocked())
			}
		}
		op.mu.Unlock()
	}
	s.o.sendAsync(sends)
}

// read handles the connection's messages that d did not take on the
// reader, until it fails.
func (s *session) read(conn *msgr.Conn, d *dispatch) {
	for msg := range conn.Incoming() {
		s.handle(conn, msg)
		d.handled()
	}
}

// handle handles one message from the session's connection.
func (s *session) handle(conn *msgr.Conn, msg *msgr.Message) {
	o := s.o
	switch msg.Type {
	case MsgOSDOpReply:
		r, err := DecodeOSDOpReply(msg)
		if err != nil {
			o.log.Warn("osdc: bad reply from OSD; reconnecting", "osd", s.osd, "err", err)
			_ = conn.Close()
			return
		}
		o.handleReply(s, r)
	case MsgWatchNotify:
		w, err := DecodeWatchNotify(msg)
		if err != nil {
			o.log.Warn("osdc: bad watch-notify from OSD", "osd", s.osd, "err", err)
			return
		}
		o.handleWatchNotify(w)
	case MsgOSDBackoff:
		b, err := DecodeOSDBackoff(msg)
		if err != nil {
			o.log.Warn("osdc: bad backoff from OSD", "osd", s.osd, "err", err)
			return
		}
		s.handleBackoff(conn, b)
	case MsgOSDMap:
		if err := o.HandleOSDMap(msg); err != nil {
			o.log.Debug("osdc: OSD map from OSD not used", "osd", s.osd, "err", err)
		}
	default:
		o.log.Debug("osdc: unexpected message from OSD", "osd", s.osd, "type", msg.Type)
	}
}

// handleBackoff registers or lifts a backoff. A block is acknowledged;
// lifting one resends every request it covered.
func (s *session) handleBackoff(conn *msgr.Conn, b *MOSDBackoff) {
	switch b.Op {
	case BackoffBlock:
		s.o.stats.backoffs.Add(1)
		s.mu.Lock()
		if s.conn == conn {
			s.backoffs[b.ID] = b
		}
		s.mu.Unlock()
		s.o.log.Debug("osdc: backoff", "osd", s.osd, "pg", b.PGID.String(), "id", b.ID, "begin", b.Begin.String(), "end", b.End.String())
		ack := &MOSDBackoff{PGID: b.PGID, Epoch: b.Epoch, Op: BackoffAckBlock, ID: b.ID,
			Begin: b.Begin, End: b.End, Priority: clientOpPriority}
		s.o.spawn(func() { _ = conn.Send(s.o.ctx, ack.Message()) })
	case BackoffUnblock:
		s.mu.Lock()
		blk, ok := s.backoffs[b.ID]
		delete(s.backoffs, b.ID)
		ops := make([]*op, 0, len(s.ops))
		for _, op := range s.ops {
			ops = append(ops, op)
		}
		s.mu.Unlock()
		if !ok {
			return
		}
		s.o.log.Debug("osdc: backoff lifted", "osd", s.osd, "pg", b.PGID.String(), "id", b.ID)
		var sends sendBatch
		for _, op := range ops {
			op.mu.Lock()
			if op.sess == s && !op.finished && op.t.spg == blk.PGID && blk.covers(op.t.hobject(op.b.oid)) {
				op.sentConn = nil
				sends.add(op, op.prepareLocked())
			}
			op.mu.Unlock()
		}
		s.o.sendAsync(sends)
	}
}
