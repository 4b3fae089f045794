package nbd

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"
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
	share int64   // budget bytes held
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
	ss          *session
	exp         *exportState
	br          *bufio.Reader
	structured  bool
	blockStatus bool // base:allocation selected for this export
	kernel      bool // entered by ServeTransmission

	budget   *budget
	writer   *replyWriter
	handlers sync.WaitGroup
	replies  sync.Pool
	draining bool // shutting down: new requests get NBD_ESHUTDOWN
	mu       sync.Mutex
}

// transmit serves requests until the client disconnects, the connection
// fails or the server shuts down.
func (ss *session) transmit(exp *exportState, kernel bool) error {
	t := &transmission{
		ss:          ss,
		exp:         exp,
		br:          ss.br,
		structured:  ss.structured,
		blockStatus: ss.structured && ss.metaSelected && ss.metaExport == exp.Name,
		kernel:      kernel,
		budget:      newBudget(ss.srv.maxInFlight, ss.srv.maxInFlightBytes),
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
	ss.enterTransmission(t.beginShutdown)

	err := t.readLoop()

	t.handlers.Wait()
	close(t.writer.in)
	<-t.writer.done
	if err == nil && t.writer.err != nil {
		err = fmt.Errorf("nbd transmission: send reply: %w", t.writer.err)
	}
	return err
}

// beginShutdown reacts to the server's Shutdown. A kernel connection is
// not read any further; other clients get NBD_ESHUTDOWN for new requests
// until the ones in flight are answered, and then the reading stops.
func (t *transmission) beginShutdown() {
	if t.kernel {
		t.stopReading()
		return
	}
	t.mu.Lock()
	t.draining = true
	t.mu.Unlock()
	if t.budget.setIdle(t.stopReading) {
		t.stopReading()
	}
}

func (t *transmission) stopReading() {
	t.ss.currentConn().SetReadDeadline(time.Now())
}

func (t *transmission) isDraining() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.draining
}

// readLoop reads requests and starts their handlers. It returns nil after
// NBD_CMD_DISC.
func (t *transmission) readLoop() error {
	var h [requestHeaderLen]byte
	for {
		if _, err := io.ReadFull(t.br, h[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return errCleanEnd
			}
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
		if !t.blockStatus {
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
	switch req.typ {
	case cmdRead, cmdWrite:
		req.share = int64(req.length)
	case cmdBlockStatus:
		req.share = blockStatusShare
	}
	if err := t.budget.acquire(t.ss.ctx, req.share); err != nil {
		return fmt.Errorf("nbd transmission: wait for budget: %w", err)
	}
	if req.typ == cmdWrite && req.length > 0 {
		req.buf = t.ss.srv.buffers.get(int(req.length))
		req.data = *req.buf
		if _, err := io.ReadFull(t.br, req.data); err != nil {
			t.ss.srv.buffers.put(req.buf)
			t.budget.release(req.share)
			return fmt.Errorf("nbd transmission: read WRITE payload: %w", err)
		}
	}
	t.handlers.Add(1)
	r := *req
	go t.handle(&r)
	return nil
}

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
	t.writer.in <- r
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
	t.ss.srv.buffers.put(r.buf)
	held, share := r.held, r.share
	r.reset()
	t.replies.Put(r)
	if held {
		t.budget.release(share)
	}
}
