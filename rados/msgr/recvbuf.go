package msgr

import (
	"encoding/binary"
	"errors"
	"sync"
	"time"
)

// ErrWithdrawn fails a connection whose owner withdrew the buffer a
// message was arriving into (Conn.Withdraw) while the peer held back
// the rest of that message.
var ErrWithdrawn = errors.New("msgr: a receive buffer was withdrawn while a stalled message arrived into it")

// withdrawGrace is how long Withdraw waits for the reader to stop
// filling a withdrawn buffer (it checks after every read from the
// socket, of at most dataChunk bytes, so normally within microseconds)
// before it fails the connection to stop it.
const withdrawGrace = 200 * time.Millisecond

// recvBuffers are the buffers owners registered for data segments, by
// tid, and the one the reader is filling.
type recvBuffers struct {
	mu     sync.Mutex
	byTid  map[uint64]recvBuffer
	active recvBuffer // the buffer being filled, when filling
	// filling is set while the reader writes into active.buf; withdrawn
	// once its owner took it back, and stopped (created by the first
	// Withdraw to wait) is closed when the reader lets go of it.
	filling   bool
	withdrawn bool
	stopped   chan struct{}
}

// recvBuffer is one registration.
type recvBuffer struct {
	tid uint64
	typ uint16
	buf []byte
}

// RecvInto registers buf to receive the data segment of the next
// message of type typ with tid, so it is read straight from the socket
// into buf instead of into fresh memory (for an OSD read into the
// caller's buffer). It applies when that segment is not empty and fits
// in buf, and in crc mode only (a secure-mode frame is decrypted as a
// whole); the message's Data is then buf[:n]. A registration is used
// once; another for the same tid replaces it. Until the message has
// arrived or Withdraw has returned, the connection may write into buf.
func (c *Conn) RecvInto(tid uint64, typ uint16, buf []byte) {
	if len(buf) == 0 {
		return
	}
	c.rx.mu.Lock()
	defer c.rx.mu.Unlock()
	if c.rx.byTid == nil {
		c.rx.byTid = map[uint64]recvBuffer{}
	}
	c.rx.byTid[tid] = recvBuffer{tid: tid, typ: typ, buf: buf}
}

// Withdraw cancels the registration for tid and returns once the
// connection no longer writes into its buffer. When a message is
// arriving into the buffer at that moment, the reader reads the rest of
// it into scratch memory and drops the message (its data is gone);
// Withdraw waits for it to finish the chunk it is reading. A peer that
// stalls in the middle of that chunk would hold Withdraw up: after
// withdrawGrace the connection is failed with ErrWithdrawn instead,
// which stops the reader at once. A message that arrived whole before
// Withdraw refers to the buffer and is delivered.
func (c *Conn) Withdraw(tid uint64) {
	c.rx.mu.Lock()
	delete(c.rx.byTid, tid)
	if !c.rx.filling || c.rx.active.tid != tid {
		c.rx.mu.Unlock()
		return
	}
	c.rx.withdrawn = true
	if c.rx.stopped == nil {
		c.rx.stopped = make(chan struct{})
	}
	stopped := c.rx.stopped
	c.rx.mu.Unlock()
	t := time.NewTimer(withdrawGrace)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		c.fail(ErrWithdrawn)
		<-stopped
	}
}

// claimRecv is the frame reader's dataBuf: the registered buffer for the
// message whose header is control, if its n-byte data segment fits.
func (c *Conn) claimRecv(control []byte, n uint32) []byte {
	if len(control) < header2Len {
		return nil
	}
	tid := binary.LittleEndian.Uint64(control[8:])
	typ := binary.LittleEndian.Uint16(control[16:])
	c.rx.mu.Lock()
	defer c.rx.mu.Unlock()
	r, ok := c.rx.byTid[tid]
	if !ok || r.typ != typ || int(n) > len(r.buf) {
		return nil
	}
	delete(c.rx.byTid, tid)
	c.rx.active, c.rx.filling, c.rx.withdrawn, c.rx.stopped = r, true, false, nil
	return r.buf[:n:n]
}

// keepRecv is the frame reader's dataKeep: false once the buffer being
// filled was withdrawn.
func (c *Conn) keepRecv() bool {
	c.rx.mu.Lock()
	defer c.rx.mu.Unlock()
	return !c.rx.withdrawn
}

// releaseRecv is the frame reader's dataDone: the reader no longer
// writes into the buffer; it reports whether the owner still wants it
// (so the message may refer to it).
func (c *Conn) releaseRecv() bool {
	c.rx.mu.Lock()
	kept := !c.rx.withdrawn
	stopped := c.rx.stopped
	c.rx.active, c.rx.filling, c.rx.withdrawn, c.rx.stopped = recvBuffer{}, false, false, nil
	c.rx.mu.Unlock()
	if stopped != nil {
		close(stopped)
	}
	return kept
}
