package nbd

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"github.com/purerbd/purerbd/internal/workpool"
)

// request is one decoded transmission request.
type request struct {
	flags  uint16
	typ    uint16
	cookie uint64
	off    uint64
	length uint32

	data  []byte  // WRITE payload
	buf   *[]byte // pooled buffer behind data
	share share   // what it holds of the budget
	svc   serviceStart
	began time.Time // when dispatched, with an Observer
	// failed is set when the request was answered with an error.
	failed bool
}

// decodeRequestHeader decodes the 28-byte request header.
func decodeRequestHeader(h *[requestHeaderLen]byte) (request, error) {
	if m := binary.BigEndian.Uint32(h[0:]); m != magicRequest {
		return request{}, transmissionViolation("request magic %#x", m)
	}
	return request{
		flags:  binary.BigEndian.Uint16(h[4:]),
		typ:    binary.BigEndian.Uint16(h[6:]),
		cookie: binary.BigEndian.Uint64(h[8:]),
		off:    binary.BigEndian.Uint64(h[16:]),
		length: binary.BigEndian.Uint32(h[24:]),
	}, nil
}

// blockStatusShare is the budget a block status request holds: its
// extents and its reply at their largest.
const blockStatusShare = maxExtents * (16 + 8)

// maxDiscardedWrite is the largest over-size WRITE payload the server
// reads and throws away to answer NBD_EINVAL and stay in step; a larger
// one ends the connection.
const maxDiscardedWrite = 2 * DefaultMaxPayload

// transmission is the transmission phase of one connection.
type transmission struct {
	ss *session
	// ctx is what backend calls run under: the session's, cancelled
	// early when the kernel gives up on the connection.
	ctx        context.Context
	cancel     context.CancelFunc
	exp        *exportState
	br         *bufio.Reader
	structured bool
	contexts   []metaContext // the metadata contexts selected for this export
	kernel     bool          // entered by ServeTransmission
	// inline: requests are served by the goroutine that reads them, which
	// also writes their replies, batched until it would wait for more
	// requests. For backends that never block (Memory), this saves two
	// goroutine hand-offs and a write per request.
	inline bool
	// mem is the export's Memory when served inline: reads are answered
	// from its chunks without a copy (readMemory), with pieces and zeros
	// as scratch.
	mem    *Memory
	pieces []memPiece
	zeros  []byte

	budget   *budget
	writer   *replyWriter
	handlers sync.WaitGroup
	// pool runs handle on goroutines it keeps while requests come (see
	// handlerIdle); it is stopped when the transmission ends.
	pool     *workpool.Pool[*request]
	replies  sync.Pool
	draining bool // shutting down: new requests get NBD_ESHUTDOWN
	mu       sync.Mutex

	// Kernel connections hand over on Shutdown instead of draining; see
	// beginShutdown. All three are guarded by mu.
	handover bool // Shutdown began on a kernel connection
	waiting  bool // the read loop waits for a request header
	readShut bool // the read side is shut: the client's sends now fail
}

// selectedContexts are the contexts the last SET_META_CONTEXT selected,
// if it named exp and structured replies are on.
func (ss *session) selectedContexts(exp *exportState) []metaContext {
	if !ss.structured || ss.metaExport != exp.Name {
		return nil
	}
	return ss.metaContexts
}

// transmit serves requests until the client disconnects, the connection
// fails or the server shuts down.
func (ss *session) transmit(exp *exportState, kernel bool) error {
	t := &transmission{
		ss:         ss,
		exp:        exp,
		br:         ss.br,
		structured: ss.structured,
		contexts:   ss.selectedContexts(exp),
		kernel:     kernel,
		inline:     exp.inline,
		budget:     newBudget(ss.srv.maxInFlight, ss.srv.maxInFlightBytes, ss.srv.maxReplyBytes),
	}
	t.pool = workpool.New(handlerIdle, t.handle)
	t.ctx, t.cancel = context.WithCancel(ss.ctx)
	defer t.cancel()
	ss.srv.transmitting.Add(1)
	defer ss.srv.transmitting.Add(-1)
	if t.inline {
		t.mem, _ = exp.Backend.(*Memory)
	}
	t.replies.New = func() any { return new(reply) }
	t.writer = &replyWriter{
		w:       ss.bw,
		in:      make(chan *reply, ss.srv.maxInFlight+16),
		done:    make(chan struct{}),
		recycle: t.recycle,
		fail: func(err error) {
			ss.log.Debug("nbd: write failed, dropping connection", "err", err)
			ss.currentConn().Close()
		},
	}
	go t.writer.run()
	if t.inline {
		ss.rd.beforeBlock = t.writer.flushInline
	}
	// Polling for the next request pays only where the answers come
	// within microseconds: a backend in memory. Behind one that waits
	// for the network (an RBD image), requests come at its pace and the
	// polls take CPU from what it waits for (rawsock's figures).
	ss.rd.setPoll(t.inline)
	defer ss.rd.setPoll(false)
	ss.enterTransmission(t.beginShutdown)

	err := t.readLoop()
	ss.rd.beforeBlock = nil
	if t.kernel && err != nil && !t.isReadShut() {
		// The kernel gave up on this connection (a request on it timed
		// out, or the device went away) rather than handing it over:
		// it resends what it sent here on another connection. A request
		// still waiting for its backend must not land after the resent
		// copy and the writes that follow it, so the backend calls are
		// cancelled (one already at the OSDs is ordered before the
		// resend there); whatever can still be answered is, with the
		// cancellation's error.
		t.cancel()
	}

	t.handlers.Wait()
	t.pool.Stop()
	close(t.writer.in)
	<-t.writer.done
	if err == nil && t.writer.err != nil {
		err = fmt.Errorf("nbd transmission: send reply: %w", t.writer.err)
	}
	return err
}

// beginShutdown reacts to the server's Shutdown. Other clients get
// NBD_ESHUTDOWN for new requests until the ones in flight are answered,
// and then the reading stops.
//
// A kernel connection cannot be told to stop sending, and the kernel
// resends a request that it wrote but never saw answered only when the
// request times out. So such a connection hands over instead: it goes on
// reading and answering until it is idle (nothing in flight, nothing
// buffered), then shuts its read side. From then on the kernel's sends
// fail at once, which makes it requeue those requests for its next
// connection (a Reattach); what it had already sent is still read and
// answered, and the connection closes when the read side runs dry.
func (t *transmission) beginShutdown() {
	if t.kernel {
		t.mu.Lock()
		t.handover = true
		t.mu.Unlock()
		t.budget.setIdle(t.wake)
		t.wake()
		return
	}
	t.mu.Lock()
	t.draining = true
	t.mu.Unlock()
	if t.budget.setIdle(t.stopReading) {
		t.stopReading()
	}
}

// wake interrupts the read loop if it waits for a request header, so that
// it checks again whether a handing-over connection is idle. It never
// interrupts the read of a payload.
func (t *transmission) wake() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.waiting {
		t.ss.currentConn().SetReadDeadline(time.Now())
	}
}

// awaitHeader waits until a whole request header is buffered, shutting
// the read side of a handing-over connection once it is idle.
func (t *transmission) awaitHeader() error {
	if !t.kernel {
		_, err := t.br.Peek(requestHeaderLen)
		return t.headerErr(err, false)
	}
	for {
		t.mu.Lock()
		t.waiting = true
		handover, shut := t.handover, t.readShut
		t.mu.Unlock()
		if handover && !shut && t.br.Buffered() == 0 && t.budget.inFlight() == 0 {
			if !t.shutRead() {
				t.mu.Lock()
				t.waiting = false
				t.mu.Unlock()
				return errCleanEnd
			}
		}
		_, err := t.br.Peek(requestHeaderLen)
		t.mu.Lock()
		t.waiting = false
		handover, shut = t.handover, t.readShut
		t.mu.Unlock()
		if handover {
			// Only wake sets deadlines on a kernel connection, and only
			// while waiting is set.
			t.ss.currentConn().SetReadDeadline(time.Time{})
		}
		if handover && errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		return t.headerErr(err, shut)
	}
}

// headerErr turns the error of waiting for a request header into what the
// read loop returns.
func (t *transmission) headerErr(err error, readShut bool) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF) && (t.br.Buffered() == 0 || readShut):
		// A partial request after the read side was shut is one the
		// kernel failed to send and requeues.
		return errCleanEnd
	case errors.Is(err, io.EOF):
		return fmt.Errorf("nbd transmission: read request: %w", io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("nbd transmission: read request: %w", err)
}

// shutRead shuts the read side of the connection; false when the
// connection cannot do that, and must simply be closed.
func (t *transmission) shutRead() bool {
	cr, ok := t.ss.currentConn().(interface{ CloseRead() error })
	if !ok {
		return false
	}
	t.mu.Lock()
	t.readShut = true
	t.mu.Unlock()
	if err := cr.CloseRead(); err != nil {
		t.ss.log.Debug("nbd: shutting the read side", "err", err)
		return false
	}
	t.ss.log.Debug("nbd: kernel connection idle, read side shut for the handover")
	return true
}

func (t *transmission) stopReading() {
	t.ss.currentConn().SetReadDeadline(time.Now())
}

func (t *transmission) isReadShut() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.readShut
}

func (t *transmission) isDraining() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.draining
}

// readLoop reads requests and starts their handlers. It returns nil after
// NBD_CMD_DISC.
func (t *transmission) readLoop() error {
	err := t.readRequests()
	if err != nil && t.isReadShut() && errors.Is(err, io.ErrUnexpectedEOF) {
		// The kernel failed to finish sending a request once the read
		// side was shut; it requeues it.
		return errCleanEnd
	}
	return err
}

func (t *transmission) readRequests() error {
	var h [requestHeaderLen]byte
	for {
		if err := t.awaitHeader(); err != nil {
			return err
		}
		if _, err := io.ReadFull(t.br, h[:]); err != nil {
			return fmt.Errorf("nbd transmission: read request: %w", err)
		}
		req, err := decodeRequestHeader(&h)
		if err != nil {
			return err
		}
		if req.typ == cmdDisc {
			return nil
		}
		if t.isDraining() {
			if err := t.skipPayload(&req); err != nil {
				return err
			}
			t.sendError(&req, ErrShutdown, "server shutting down")
			continue
		}
		if errno, msg := t.validate(&req); errno != 0 {
			if err := t.skipPayload(&req); err != nil {
				return err
			}
			t.sendError(&req, errno, msg)
			continue
		}
		if err := t.dispatch(&req); err != nil {
			return err
		}
	}
}

// skipPayload consumes the payload of a WRITE that will not be served.
func (t *transmission) skipPayload(req *request) error {
	if req.typ != cmdWrite || req.length == 0 {
		return nil
	}
	if req.length > maxDiscardedWrite {
		return transmissionViolation("WRITE of %d bytes, over the %d-byte limit", req.length, t.exp.maxLoad)
	}
	if _, err := io.CopyN(io.Discard, t.br, int64(req.length)); err != nil {
		return fmt.Errorf("nbd transmission: skip WRITE payload: %w", err)
	}
	return nil
}

// validate checks a request before anything is done or sent for it.
func (t *transmission) validate(req *request) (Errno, string) {
	e := t.exp
	flags := e.transmissionFlags(t.structured)
	allowed := uint16(0)
	if flags&flagSendFUA != 0 {
		allowed |= cmdFlagFUA
	}
	writes := false
	switch req.typ {
	case cmdRead:
		if t.structured {
			allowed |= cmdFlagDF
		}
	case cmdWrite, cmdWriteZeroes, cmdTrim:
		writes = true
		if req.typ == cmdWriteZeroes {
			allowed |= cmdFlagNoHole | cmdFlagFastZero
		}
	case cmdFlush:
		if flags&flagSendFlush == 0 {
			return ErrInvalid, "NBD_CMD_FLUSH not offered"
		}
		if req.off != 0 || req.length != 0 {
			return ErrInvalid, "NBD_CMD_FLUSH with offset or length"
		}
	case cmdCache:
	case cmdBlockStatus:
		allowed |= cmdFlagReqOne
		if len(t.contexts) == 0 {
			return ErrInvalid, "no metadata context negotiated"
		}
	default:
		return ErrInvalid, fmt.Sprintf("unknown command %d", req.typ)
	}
	if req.flags&^allowed != 0 {
		return ErrInvalid, fmt.Sprintf("command flags %#x not valid here", req.flags)
	}
	if writes && e.ReadOnly {
		return ErrPerm, "export is read-only"
	}
	if req.typ == cmdTrim && flags&flagSendTrim == 0 {
		return ErrInvalid, "NBD_CMD_TRIM not offered"
	}
	if (req.typ == cmdRead || req.typ == cmdWrite) && req.length > e.maxLoad {
		if req.typ == cmdRead && t.structured {
			return ErrOverflow, "read over the maximum payload"
		}
		return ErrInvalid, "request over the maximum payload"
	}
	if req.typ == cmdFlush {
		return 0, ""
	}
	size := e.Backend.Size()
	if size < 0 || req.off > math.MaxInt64 || req.off+uint64(req.length) > uint64(size) {
		if req.typ == cmdWrite || req.typ == cmdWriteZeroes {
			return ErrNoSpace, "write beyond the end of the export"
		}
		return ErrInvalid, "request beyond the end of the export"
	}
	if m := uint64(e.minBlock); m > 1 && (req.off%m != 0 || uint64(req.length)%m != 0) {
		return ErrInvalid, "request not aligned to the minimum block size"
	}
	return 0, ""
}

// dispatch reads the payload of a valid request and starts its handler.
func (t *transmission) dispatch(req *request) error {
	st := t.ss.srv.serviceTimes
	if st != nil {
		req.svc = st.start()
	}
	obs := t.ss.srv.observer
	if obs != nil {
		req.began = time.Now()
		obs.Started(Command(req.typ))
	}
	// abandon ends a request that never reached its handler (which
	// would have ended its service time).
	abandon := func() {
		if st != nil {
			st.done(req.svc)
		}
		if obs != nil {
			obs.Done(Command(req.typ), req.length, time.Since(req.began), true)
		}
	}
	switch req.typ {
	case cmdRead:
		req.share = share{bytes: int64(req.length), reply: true}
	case cmdWrite:
		req.share = share{bytes: int64(req.length)}
	case cmdBlockStatus:
		req.share = share{bytes: blockStatusShare * int64(len(t.contexts)), reply: true}
	}
	if err := t.budget.acquire(t.ss.ctx, req.share); err != nil {
		abandon()
		return fmt.Errorf("nbd transmission: wait for budget: %w", err)
	}
	if req.typ == cmdWrite && req.length > 0 && t.inline && int(req.length) <= t.br.Size() {
		// Served inline: the payload is written from the read buffer and
		// dropped from it afterwards, never copied to a payload buffer.
		data, err := t.br.Peek(int(req.length))
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // as io.ReadFull says
			}
			t.budget.release(req.share)
			abandon()
			return fmt.Errorf("nbd transmission: read WRITE payload: %w", err)
		}
		req.data = data
		t.handlers.Add(1)
		t.handle(req)
		_, err = t.br.Discard(len(data))
		return err
	}
	if req.typ == cmdWrite && req.length > 0 {
		req.buf = t.ss.srv.buffers.Get(int(req.length))
		req.data = *req.buf
		if _, err := io.ReadFull(t.br, req.data); err != nil {
			t.ss.srv.buffers.Put(req.buf)
			t.budget.release(req.share)
			abandon()
			return fmt.Errorf("nbd transmission: read WRITE payload: %w", err)
		}
	}
	t.handlers.Add(1)
	if t.inline {
		t.handle(req)
		return nil
	}
	r := *req
	t.pool.Go(&r)
	return nil
}

// handlerIdle is how long a handler goroutine waits for another request
// before it ends. Handlers are kept because a goroutine per request would
// grow its stack from scratch down the backend's call chain every time
// (runtime.newstack), which is a large part of the cost of a small write
// to an RBD image.
const handlerIdle = 2 * time.Second

// newReply takes a reply that will release the request's budget share.
func (t *transmission) newReply(req *request) *reply {
	r := t.replies.Get().(*reply)
	r.reset()
	r.share, r.held = req.share, true
	return r
}

// sendError answers a request that was refused before dispatch (it holds
// no budget share).
func (t *transmission) sendError(req *request, errno Errno, msg string) {
	r := t.replies.Get().(*reply)
	r.reset()
	t.encodeError(r, req, errno, msg)
	t.send(r)
}

// send hands a finished reply to the writer.
func (t *transmission) send(r *reply) {
	if t.inline {
		t.writer.writeInline(r)
		return
	}
	others := t.budget.inFlight()
	if r.held {
		others-- // r's own request
	}
	t.writer.send(r, others == 0)
}

// encodeError answers req with an error: an error chunk when structured
// replies are in use, a simple reply otherwise.
func (t *transmission) encodeError(r *reply, req *request, errno Errno, msg string) {
	if t.structured {
		r.errorChunk(req.cookie, errno, msg)
		return
	}
	r.simple(req.cookie, errno)
}

// recycle runs in the writer after a reply went out.
func (t *transmission) recycle(r *reply) {
	t.ss.srv.buffers.Put(r.buf)
	held, share := r.held, r.share
	r.reset()
	t.replies.Put(r)
	if held {
		t.budget.release(share)
	}
}
