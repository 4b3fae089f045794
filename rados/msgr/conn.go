package msgr

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerbd/purerbd/internal/rawsock"
	"github.com/purerbd/purerbd/rados/crc32c"
	"github.com/purerbd/purerbd/rados/denc"
)

// defaultHandshakeTimeout bounds Dial when ctx has no earlier deadline.
const defaultHandshakeTimeout = 30 * time.Second

// Conn is an established msgr2.1 connection. Its methods are safe for
// concurrent use.
type Conn struct {
	cfg Config
	nc  net.Conn
	// raw writes to nc with raw system calls (package rawsock), and br
	// reads from it that way, when nc is a TCP connection on Linux: a
	// call that copies megabytes then keeps its P instead of having it
	// handed to another thread. nil when nc is anything else.
	raw *rawsock.Writer
	// wmu is held while frames are built and written, by the writer
	// goroutine or by a Send that writes its message itself; it guards
	// splicer, noSplice, fw, wbufs and outSeq.
	wmu sync.Mutex
	// splicer sends large Data segments by reference (SpliceData) on a
	// raw connection in crc mode: made by the writer at the first such
	// segment, closed when the writer ends; noSplice once that failed.
	splicer  *rawsock.Splicer
	noSplice bool
	br       *bufio.Reader
	fr       *frameReader // owned by the reader goroutine after Dial
	fw       *frameWriter // the frames being written
	wbufs    net.Buffers  // the batch being written
	outSeq   uint64       // last message sequence sent
	target   denc.EntityAddr
	log      *slog.Logger
	// senders counts the Sends in progress: one alone, of a message
	// marked Alone, writes it itself (sendDirect).
	senders atomic.Int32

	// Set by the handshake, read-only afterwards.
	mode         ConnMode
	myAddr       denc.EntityAddr
	globalID     uint64
	peerAddrs    denc.EntityAddrVec
	peerGID      int64
	peerFeatures uint64
	features     uint64

	rx recvBuffers // buffers registered with RecvInto

	incoming chan *Message
	sendq    sendQueue     // messages waiting for the writer
	reqs     sync.Pool     // *sendReq the writer is done with, for reuse
	wake     chan struct{} // reader -> writer: an ack or keepalive reply is due
	done     chan struct{}
	failOnce sync.Once
	err      error
	wg       sync.WaitGroup

	inSeq     atomic.Uint64 // last message sequence received
	lastRx    atomic.Int64  // unix nanos of the last frame received
	stalled   atomic.Bool   // the reader waits for the owner to take a message
	kaReply   atomic.Pointer[denc.UTime]
	lastKAAck atomic.Int64 // unix nanos of the last KEEPALIVE2_ACK
}

// sendReq is one message waiting for the writer.
type sendReq struct {
	m     *Message
	state atomic.Int32 // sendQueued, sendTaken, sendCanceled
	done  chan error
	// sums are the crc32c of m's front, middle and data, computed by the
	// sender in crc mode (the only mode that sends them): the one writer
	// goroutine of a connection then only writes, and the crcs of
	// messages sent together are computed in parallel (a 4 MiB write's
	// takes half a millisecond).
	sums [maxSegments - 1]uint32
}

const (
	sendQueued int32 = iota
	sendTaken
	sendCanceled
)

// Dial connects to addr, authenticates and establishes a session. addr
// is "IP:PORT" or a Ceph address such as "v2:10.0.0.1:3300/0"; the nonce
// of a Ceph address must match the daemon's (monitors use 0, OSDs a
// random one from the OSDMap), as the peer checks it. A monitor address
// without a port means 3300.
//
// ctx bounds the handshake only (30 s at most unless ctx ends earlier).
// The returned Conn runs until Close or a fault.
func Dial(ctx context.Context, addr string, cfg Config) (*Conn, error) {
	a, err := denc.ParseEntityAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("msgr: dial %q: %w", addr, err)
	}
	return DialAddr(ctx, a, cfg)
}

// DialAddr is Dial with a parsed address. An address of type "any" is
// taken as a v2 address; v1 addresses are refused.
func DialAddr(ctx context.Context, addr denc.EntityAddr, cfg Config) (*Conn, error) {
	if cfg.Auth == nil {
		return nil, errors.New("msgr: Config.Auth is required")
	}
	if cfg.PeerType == 0 {
		return nil, errors.New("msgr: Config.PeerType is required")
	}
	switch addr.Type {
	case denc.AddrAny:
		addr.Type = denc.AddrMsgr2
	case denc.AddrMsgr2:
	default:
		return nil, fmt.Errorf("msgr: dial %s: not a msgr2 address", addr)
	}
	if addr.Port == 0 && cfg.PeerType == denc.EntityTypeMon {
		addr.Port = 3300
	}
	if !addr.IP.IsValid() || addr.Port == 0 {
		return nil, fmt.Errorf("msgr: dial %s: need an IP address and port", addr)
	}
	cfg = cfg.withDefaults()
	if cfg.Nonce == 0 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("msgr: random nonce: %w", err)
		}
		cfg.Nonce = binary.LittleEndian.Uint32(b[:]) | 1
	}

	deadline := time.Now().Add(defaultHandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	dial := cfg.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	nc, err := dial(dctx, "tcp", addr.AddrPort().String())
	if err != nil {
		return nil, fmt.Errorf("msgr: dial %s: %w", addr, err)
	}
	var rd io.Reader = nc
	var raw *rawsock.Writer
	if rc := rawsock.Of(nc); rc != nil {
		rd, raw = rawsock.NewReader(rc, false), rawsock.NewWriter(rc)
	}
	c := &Conn{
		cfg:      cfg,
		nc:       nc,
		raw:      raw,
		br:       bufio.NewReaderSize(rd, 64<<10),
		fr:       newFrameReader(cfg.limits()),
		fw:       &frameWriter{},
		target:   addr,
		log:      cfg.Logger.With("peer", addr.String()),
		incoming: make(chan *Message, cfg.IncomingQueue),
		sendq:    newSendQueue(),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	// The handshake runs under a socket deadline; cancelling ctx cuts it.
	_ = nc.SetDeadline(deadline)
	stop := context.AfterFunc(dctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	herr := (&handshake{c: c}).run()
	stopped := stop()
	if herr == nil && !stopped {
		herr = dctx.Err()
	}
	if herr != nil {
		nc.Close()
		cerr := dctx.Err()
		if cerr == nil && errors.Is(herr, os.ErrDeadlineExceeded) {
			// The socket deadline is the handshake deadline; it may fire
			// a moment before the context's own timer.
			cerr = context.DeadlineExceeded
		}
		if cerr != nil && !errors.Is(herr, cerr) {
			herr = fmt.Errorf("%w (%w)", cerr, herr)
		} else if peerGone(herr) {
			herr = fmt.Errorf("%w during the handshake: %w", ErrPeerClosed, herr)
		}
		return nil, fmt.Errorf("msgr: handshake with %s %s: %w", cfg.PeerType, addr, herr)
	}
	_ = nc.SetDeadline(time.Time{})
	c.fr.dataBuf, c.fr.dataKeep, c.fr.dataDone = c.claimRecv, c.keepRecv, c.releaseRecv
	c.lastRx.Store(time.Now().UnixNano())
	c.log.Debug("msgr: connected", "mode", c.mode.String(), "global_id", c.globalID,
		"peer_gid", c.peerGID, "features", fmt.Sprintf("%#x", c.features))
	c.wg.Add(2)
	go c.readLoop()
	go c.writeLoop()
	return c, nil
}

// Incoming delivers received messages in order, but for those
// Config.Intercept took. It is closed after the connection fails or is
// closed, once the messages received before that have been delivered.
func (c *Conn) Incoming() <-chan *Message { return c.incoming }

// Done is closed when the connection has failed or been closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended (ErrClosed after Close), or nil
// while it is up.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Mode returns the negotiated connection mode.
func (c *Conn) Mode() ConnMode { return c.mode }

// Features returns the Ceph features both ends support: what message
// encodings should assume.
func (c *Conn) Features() uint64 { return c.features }

// PeerFeatures returns the features the peer advertised.
func (c *Conn) PeerFeatures() uint64 { return c.peerFeatures }

// PeerAddrs returns the addresses the peer identified itself with.
func (c *Conn) PeerAddrs() denc.EntityAddrVec { return c.peerAddrs }

// PeerName returns the peer's entity name (type and its global id).
func (c *Conn) PeerName() denc.EntityName {
	return denc.EntityName{Type: c.cfg.PeerType, Num: c.peerGID}
}

// GlobalID returns our global id as authenticated on this connection.
func (c *Conn) GlobalID() uint64 { return c.globalID }

// LastKeepaliveAck returns when the peer last answered a KEEPALIVE2
// (zero before the first answer).
func (c *Conn) LastKeepaliveAck() time.Time {
	if n := c.lastKAAck.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// LocalAddr returns the address we identified ourselves with (the IP
// the peer sees, port 0, our nonce).
func (c *Conn) LocalAddr() denc.EntityAddr { return c.myAddr }

// Send queues m and waits until it has been written to the socket; the
// caller may reuse m's buffers once Send returns. It sets m.Seq. An error
// means m may not have been (completely) sent: ctx ended before the
// writer took it, or the connection failed (messages written together
// share the outcome of their write). Messages go out in the order they
// were sent or posted (Post); those waiting together go out in one
// write. A Send of a message marked Alone, with no other Send in
// progress and nothing queued, writes m itself when the writer is idle,
// which saves two hand-offs between goroutines (and the wake-up of a
// thread) per message when messages come one at a time.
func (c *Conn) Send(ctx context.Context, m *Message) error {
	p, err := c.post(ctx, m)
	if p.req == nil {
		return err
	}
	var stop error
	select {
	case err := <-p.req.done:
		c.recycle(p.req)
		return err
	case <-ctx.Done():
		stop = ctx.Err()
	case <-c.done:
		stop = c.err // the writer has ended, or will without it
	}
	// withdrawn if still queued; if being written, bounded by the write
	// timeout
	if err := c.Settle(p); !errors.Is(err, ErrNotSent) {
		return err
	}
	return stop
}

// newReq makes the request for m, with its segments' crcs in crc mode.
func (c *Conn) newReq(m *Message) *sendReq {
	req, _ := c.reqs.Get().(*sendReq)
	if req == nil {
		req = &sendReq{done: make(chan error, 1)}
	}
	req.m = m
	if c.mode == ConnModeCRC {
		dc := m.DataCRC
		if !m.DataCRCKnown {
			dc = crc32c.Checksum(m.Data)
		}
		req.sums = [maxSegments - 1]uint32{crc32c.Checksum(m.Front), crc32c.Checksum(m.Middle), dc}
	}
	return req
}

// sendDirect writes req from the sending goroutine. c.wmu is held; it is
// released before sendDirect returns.
func (c *Conn) sendDirect(ctx context.Context, req *sendReq) error {
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return c.err
	default:
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.fw.reset()
	c.outSeq++
	req.m.Seq = c.outSeq
	c.addMessage(req.m, c.outSeq, c.inSeq.Load(), &req.sums)
	size := c.fw.size()
	err := c.writeBatch()
	if err != nil {
		c.fail(c.writeErr(err))
		return err
	}
	c.cfg.Counters.wrote(1, size)
	return nil
}

// recycle keeps a request the writer is done with for the next Send.
func (c *Conn) recycle(req *sendReq) {
	req.m = nil
	c.reqs.Put(req)
}

// Close ends the connection and waits for its goroutines to stop.
// Messages not yet read from Incoming are dropped. Close is idempotent.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	c.wg.Wait()
	return nil
}

// fail records the first error, closes the socket and signals Done.
func (c *Conn) fail(err error) {
	c.failOnce.Do(func() {
		c.err = err
		close(c.done)
		_ = c.nc.Close()
		if !errors.Is(err, ErrClosed) {
			c.log.Debug("msgr: connection failed", "err", err)
		}
	})
}

// readLoop reads frames until the connection fails.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	defer close(c.incoming)
	for {
		f, err := c.fr.read(c.br)
		if err != nil {
			select {
			case <-c.done: // closed or failed elsewhere; the socket error is a consequence
			default:
				if peerGone(err) {
					err = fmt.Errorf("%w (%s): %w", ErrPeerClosed, c.cfg.PeerType, err)
				} else {
					err = fmt.Errorf("msgr: reading from %s: %w", c.cfg.PeerType, err)
				}
				c.fail(err)
			}
			return
		}
		c.lastRx.Store(time.Now().UnixNano())
		if err := c.handleFrame(f); err != nil {
			c.fail(err)
			return
		}
	}
}

// handleFrame processes one frame of an open session.
func (c *Conn) handleFrame(f frame) error {
	switch f.tag {
	case tagMessage:
		m, _, err := decodeHeader2(f.segs[0])
		if err != nil {
			return err
		}
		want := c.inSeq.Load() + 1
		switch {
		case m.Seq < want:
			c.log.Debug("msgr: skipping old message", "seq", m.Seq, "want", want)
			return nil
		case m.Seq > want:
			return fmt.Errorf("%w: message seq %d, want %d", ErrProtocol, m.Seq, want)
		}
		c.inSeq.Store(m.Seq)
		if f.dropped {
			c.log.Debug("msgr: dropped a message whose receive buffer was withdrawn", "type", m.Type, "tid", m.Tid)
			return nil
		}
		m.Front, m.Middle, m.Data = f.segs[1], f.segs[2], f.segs[3]
		if c.cfg.Intercept != nil && c.cfg.Intercept(m) {
			return nil
		}
		select {
		case c.incoming <- m:
		default:
			// The owner is behind: wait, without counting the wait
			// against the peer's liveness.
			c.stalled.Store(true)
			select {
			case c.incoming <- m:
			case <-c.done:
				return c.err
			}
			c.lastRx.Store(time.Now().UnixNano())
			c.stalled.Store(false)
		}
		// No ACK frame: a lossy client's acknowledgements ride in the
		// ack_seq of its next message, as Ceph's (ProtocolV2 counts
		// ack_left only for lossless policies); a frame per reply would
		// cost the OSD a read and a wake-up per operation.
	case tagKeepalive2:
		ts, err := decodeStamp("KEEPALIVE2", f.segs[0])
		if err != nil {
			return err
		}
		c.kaReply.Store(&ts)
		c.poke()
	case tagKeepalive2Ack:
		if _, err := decodeStamp("KEEPALIVE2_ACK", f.segs[0]); err != nil {
			return err
		}
		c.lastKAAck.Store(time.Now().UnixNano())
	case tagAck:
		if _, err := decodeU64("ACK", f.segs[0]); err != nil {
			return err
		}
		// The peer acknowledges the messages it received. A lossy
		// connection keeps no sent message for resending (its owner
		// resends on a new connection), so an ACK has nothing to
		// release: it is checked and ignored, as Ceph's lossy
		// connections do (ProtocolV2::handle_message_ack returns at
		// once when the policy is lossy).
	default:
		return fmt.Errorf("%w: unexpected frame tag %d in an open session", ErrProtocol, f.tag)
	}
	return nil
}

// poke wakes the writer without blocking.
func (c *Conn) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Limits of one batch of messages written together: the writer takes
// every message waiting for it, up to these.
const (
	maxBatchMsgs  = 64
	maxBatchBytes = 4 << 20
)

// writeLoop writes messages, acks and keepalives until the connection
// fails. Messages waiting together go out in one batch: one writev.
func (c *Conn) writeLoop() {
	defer c.wg.Done()
	defer func() {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		if c.splicer != nil {
			c.splicer.Close()
			c.splicer, c.noSplice = nil, true
		}
	}()
	var tick <-chan time.Time
	if c.cfg.KeepaliveInterval > 0 {
		t := time.NewTicker(c.cfg.KeepaliveInterval)
		defer t.Stop()
		tick = t.C
	}
	var batch []*sendReq
	for {
		var err error
		select {
		case <-c.done:
			return
		case <-c.sendq.kick:
			if c.sendq.len() == 1 {
				// Let the senders that are runnable queue their
				// messages first: the one that woke this goroutine made
				// it the next to run (the scheduler's runnext), ahead of
				// the other callers about to send, so that each message
				// would otherwise go out in a write of its own.
				runtime.Gosched()
			}
			// The batch is taken with the write lock held, so that a
			// Send writing its message itself (tryDirect) finds every
			// message queued before it written.
			c.wmu.Lock()
			batch = c.sendq.take(batch[:0])
			if len(batch) == 0 {
				c.wmu.Unlock()
				continue
			}
			ack := c.inSeq.Load()
			c.fw.reset()
			for _, r := range batch {
				c.outSeq++
				r.m.Seq = c.outSeq
				c.addMessage(r.m, c.outSeq, ack, &r.sums)
			}
			size := c.fw.size()
			err = c.writeBatch()
			c.wmu.Unlock()
			if err == nil {
				c.cfg.Counters.wrote(len(batch), size)
			}
			for _, r := range batch {
				r.done <- err
			}
			clear(batch)
		case <-c.wake:
			if ts := c.kaReply.Swap(nil); ts != nil {
				c.wmu.Lock()
				err = c.writeControl(tagKeepalive2Ack, encodeStamp(*ts))
				c.wmu.Unlock()
			}
		case now := <-tick:
			if lt := c.cfg.LivenessTimeout; lt > 0 && !c.stalled.Load() && now.Sub(time.Unix(0, c.lastRx.Load())) > lt {
				err = fmt.Errorf("%w (nothing received for %s)", ErrTimeout, lt)
				break
			}
			c.wmu.Lock()
			err = c.writeControl(tagKeepalive2, encodeStamp(denc.UTimeOf(now)))
			c.wmu.Unlock()
		}
		if err != nil {
			c.fail(c.writeErr(err))
			return
		}
	}
}

// writeErr is the error the connection fails with after a write failed
// with err.
func (c *Conn) writeErr(err error) error {
	switch {
	case peerGone(err):
		return fmt.Errorf("%w (%s): %w", ErrPeerClosed, c.cfg.PeerType, err)
	case errors.Is(err, ErrTimeout):
		return err
	}
	return fmt.Errorf("msgr: writing to %s: %w", c.cfg.PeerType, err)
}

// addMessage adds a MESSAGE frame to the writer's batch; sums are the
// crcs of m's front, middle and data (used in crc mode).
func (c *Conn) addMessage(m *Message, seq, ack uint64, sums *[maxSegments - 1]uint32) {
	hdr := c.fw.alloc(header2Len)
	encodeHeader2(hdr, m, seq, ack)
	segs := [maxSegments][]byte{hdr, m.Front, m.Middle, m.Data}
	splice := m.SpliceData && len(m.Data) >= spliceMin && c.mode == ConnModeCRC && c.canSplice()
	c.fw.addSummed(tagMessage, &segs, sums, splice)
}

// spliceMin is the least data segment sent by reference: below it,
// mapping the pages into a pipe and splicing them costs about what
// copying them does.
const spliceMin = 128 << 10

// canSplice reports whether the writer has a Splicer, making it the first
// time.
func (c *Conn) canSplice() bool {
	if c.splicer != nil {
		return true
	}
	if c.raw == nil || c.noSplice {
		return false
	}
	s, err := rawsock.NewSplicer()
	if err != nil {
		c.noSplice = true
		c.log.Debug("msgr: large data segments are copied", "err", err)
		return false
	}
	c.splicer = s
	return true
}

// writeControl writes a frame with only a control segment.
func (c *Conn) writeControl(tag uint8, control []byte) error {
	segs := [maxSegments][]byte{control}
	c.fw.build(tag, &segs)
	return c.writeBatch()
}

// writeBatch writes the writer's batch with one writev (more when the
// socket takes it in parts) and resets the writer.
func (c *Conn) writeBatch() error {
	defer c.fw.reset()
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout)); err != nil {
		return err
	}
	if c.raw != nil {
		out, at := c.fw.out, 0
		for _, i := range c.fw.splice {
			if err := c.raw.Writev(nil, out[at:i]); err != nil {
				return err
			}
			if err := c.raw.Splice(c.splicer, out[i]); err != nil {
				return err
			}
			at = i + 1
		}
		return c.raw.Writev(nil, out[at:])
	}
	// c.wbufs lives in the Conn, so handing its address to WriteTo
	// (which consumes it) allocates nothing.
	c.wbufs = c.fw.out
	_, err := c.wbufs.WriteTo(c.nc)
	c.wbufs = nil
	return err
}
