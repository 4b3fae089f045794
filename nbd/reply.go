package nbd

import (
	"encoding/binary"
	"sync"
)

// reply is everything sent for one request, written as one unit by the
// reply writer. Header bytes live in meta; payload bytes are slices of
// data, or of memory outside the reply (ext: a Memory's chunks, for a
// reply written before the next request is served). parts lists what to
// write, in order.
type reply struct {
	meta  []byte
	parts []part
	data  []byte
	buf   *[]byte // pooled buffer behind data, recycled after writing
	share share   // what it holds of the budget, released after writing
	held  bool    // whether the reply holds a budget share
}

type part struct {
	fromData   bool
	start, end int
	ext        []byte // when set, the bytes to write
}

func (r *reply) reset() {
	r.meta = r.meta[:0]
	clear(r.parts)
	r.parts = r.parts[:0]
	r.data, r.buf, r.share, r.held = nil, nil, share{}, false
}

// addMeta appends header bytes.
func (r *reply) addMeta(b []byte) {
	start := len(r.meta)
	r.meta = append(r.meta, b...)
	if n := len(r.parts); n > 0 && !r.parts[n-1].fromData && r.parts[n-1].end == start {
		r.parts[n-1].end = len(r.meta)
		return
	}
	r.parts = append(r.parts, part{start: start, end: len(r.meta)})
}

// addData appends r.data[start:end].
func (r *reply) addData(start, end int) {
	if start < end {
		r.parts = append(r.parts, part{fromData: true, start: start, end: end})
	}
}

// addExt appends b, which must stay as it is until the reply is written.
func (r *reply) addExt(b []byte) {
	if len(b) > 0 {
		r.parts = append(r.parts, part{ext: b})
	}
}

// simple is a simple reply; a successful READ follows it with data.
func (r *reply) simple(cookie uint64, errno Errno) {
	var h [simpleReplyLen]byte
	binary.BigEndian.PutUint32(h[0:], magicSimpleReply)
	binary.BigEndian.PutUint32(h[4:], uint32(errno))
	binary.BigEndian.PutUint64(h[8:], cookie)
	r.addMeta(h[:])
}

// chunk is the header of one structured reply chunk whose payload
// (length bytes) the caller adds next.
func (r *reply) chunk(cookie uint64, flags, typ uint16, length uint32) {
	var h [structuredHeaderLen]byte
	binary.BigEndian.PutUint32(h[0:], magicStructuredRepl)
	binary.BigEndian.PutUint16(h[4:], flags)
	binary.BigEndian.PutUint16(h[6:], typ)
	binary.BigEndian.PutUint64(h[8:], cookie)
	binary.BigEndian.PutUint32(h[16:], length)
	r.addMeta(h[:])
}

// errorChunk is a final NBD_REPLY_TYPE_ERROR chunk with a message.
func (r *reply) errorChunk(cookie uint64, errno Errno, msg string) {
	if len(msg) > 256 {
		msg = msg[:256]
	}
	r.chunk(cookie, replyFlagDone, replyTypeError, uint32(6+len(msg)))
	var h [6]byte
	binary.BigEndian.PutUint32(h[0:], uint32(errno))
	binary.BigEndian.PutUint16(h[4:], uint16(len(msg)))
	r.addMeta(h[:])
	r.meta = append(r.meta, msg...)
	r.parts[len(r.parts)-1].end = len(r.meta)
}

// dataChunk is an NBD_REPLY_TYPE_OFFSET_DATA chunk carrying r.data[start:end].
func (r *reply) dataChunk(cookie uint64, flags uint16, off uint64, start, end int) {
	r.chunk(cookie, flags, replyTypeOffsetData, uint32(8+end-start))
	var h [8]byte
	binary.BigEndian.PutUint64(h[:], off)
	r.addMeta(h[:])
	r.addData(start, end)
}

// holeChunk is an NBD_REPLY_TYPE_OFFSET_HOLE chunk.
func (r *reply) holeChunk(cookie uint64, flags uint16, off uint64, size uint32) {
	r.chunk(cookie, flags, replyTypeOffsetHole, 12)
	var h [12]byte
	binary.BigEndian.PutUint64(h[0:], off)
	binary.BigEndian.PutUint32(h[8:], size)
	r.addMeta(h[:])
}

// replyWriter writes replies so that the bytes of one reply are never
// interleaved with another's. The reply to the only request in flight,
// when it finds the writer idle (nothing queued, the lock free), is
// written by its handler (send); otherwise the reply waits in in for the
// writer goroutine (run), which writes what queued up and flushes
// whenever no other reply is waiting. Writing directly saves a hand-off
// between goroutines, and the wake-up of a thread, per reply when
// requests come one at a time; with more in flight, the writer
// goroutine's batches save more (one write for several replies). For an
// export served inline the goroutine that reads requests writes the
// replies instead (writeInline).
type replyWriter struct {
	mu      sync.Mutex // held while writing: guards w, vec and err
	w       *connWriter
	vec     [][]byte // scratch for writeParts
	in      chan *reply
	done    chan struct{}
	recycle func(*reply)
	fail    func(error) // called once, on the first write error
	err     error       // read only under mu, or after done is closed
}

func (rw *replyWriter) run() {
	defer close(rw.done)
	for r := range rw.in {
		rw.mu.Lock()
		rw.write(r)
		rw.mu.Unlock()
		rw.recycle(r)
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.err == nil {
		if err := rw.w.Flush(); err != nil {
			rw.err = err
			rw.fail(err)
		}
	}
}

// send writes r from the calling goroutine when alone (no other request
// is in flight) and the writer is idle, or queues it for the writer
// goroutine. It must not be called once in is closed.
func (rw *replyWriter) send(r *reply, alone bool) {
	if !alone || len(rw.in) > 0 || !rw.mu.TryLock() {
		rw.in <- r
		return
	}
	rw.write(r)
	rw.mu.Unlock()
	rw.recycle(r)
}

// write puts r into the buffer and flushes unless another reply waits in
// in: whoever writes that one flushes after it. rw.mu is held.
func (rw *replyWriter) write(r *reply) {
	if rw.err != nil {
		return
	}
	err := rw.writeParts(r)
	if err == nil && len(rw.in) == 0 {
		err = rw.w.Flush()
	}
	if err != nil {
		rw.err = err
		rw.fail(err)
	}
}

// writeParts puts r into the buffer, or, when it does not fit, sends it
// with what is buffered (in one writev on a raw socket, without copying
// its payload).
func (rw *replyWriter) writeParts(r *reply) error {
	vec := rw.vec[:0]
	for _, p := range r.parts {
		switch {
		case p.ext != nil:
			vec = append(vec, p.ext)
		case p.fromData:
			vec = append(vec, r.data[p.start:p.end])
		default:
			vec = append(vec, r.meta[p.start:p.end])
		}
	}
	err := rw.w.WriteVec(vec)
	clear(vec)
	rw.vec = vec[:0]
	return err
}

// writeInline writes r from the goroutine that reads requests, for an
// export served inline; the buffer is flushed by flushInline when that
// goroutine is about to wait for more requests. Nothing is sent on in
// then, so the writer goroutine only flushes at the end.
func (rw *replyWriter) writeInline(r *reply) {
	if rw.err == nil {
		if err := rw.writeParts(r); err != nil {
			rw.err = err
			rw.fail(err)
		}
	}
	rw.recycle(r)
}

// flushInline sends what writeInline buffered.
func (rw *replyWriter) flushInline() {
	if rw.err == nil && rw.w.Buffered() > 0 {
		if err := rw.w.Flush(); err != nil {
			rw.err = err
			rw.fail(err)
		}
	}
}
