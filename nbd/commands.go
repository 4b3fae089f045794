package nbd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// handle serves one dispatched request and queues its reply.
func (t *transmission) handle(req *request) {
	defer t.handlers.Done()
	t.serve(req)
	if st := t.ss.srv.serviceTimes; st != nil {
		st.done(req.svc)
	}
	if o := t.ss.srv.observer; o != nil {
		o.Done(Command(req.typ), req.length, time.Since(req.began), req.failed)
	}
}

// serve serves req and hands its reply to the writer.
func (t *transmission) serve(req *request) {
	r := t.newReply(req)
	var err error
	switch req.typ {
	case cmdRead:
		t.read(r, req)
		t.send(r)
		return
	case cmdBlockStatus:
		t.blockStatusReply(r, req)
		t.send(r)
		return
	case cmdWrite:
		err = t.write(req)
		// The payload goes back to the pool now rather than with the
		// reply, which a client that does not read would hold up.
		t.ss.srv.buffers.Put(req.buf)
		req.buf, req.data = nil, nil
	case cmdFlush:
		err = t.exp.caps.flush(t.ctx)
	case cmdTrim:
		err = t.exp.caps.trim(t.ctx, int64(req.off), int64(req.length))
	case cmdWriteZeroes:
		err = t.writeZeroes(req)
	case cmdCache:
		if c := t.exp.caps.cache; c != nil {
			err = c.Cache(t.ctx, int64(req.off), int64(req.length))
		}
	}
	if err == nil && req.flags&cmdFlagFUA != 0 && req.typ != cmdFlush && t.exp.caps.flush != nil {
		err = t.exp.caps.flush(t.ctx)
	}
	if err != nil {
		t.replyError(r, req, err)
	} else {
		r.simple(req.cookie, 0)
	}
	t.send(r)
}

var commandNames = map[uint16]string{
	cmdRead: "read", cmdWrite: "write", cmdFlush: "flush", cmdTrim: "trim",
	cmdCache: "cache", cmdWriteZeroes: "write zeroes", cmdBlockStatus: "block status",
}

// replyError answers req with the error a backend returned.
func (t *transmission) replyError(r *reply, req *request, err error) {
	errno := ErrnoOf(err)
	req.failed = true
	t.ss.log.Debug("nbd: request failed", "cmd", commandNames[req.typ], "offset", req.off, "length", req.length, "errno", uint32(errno), "err", err)
	t.encodeError(r, req, errno, fmt.Sprintf("%s: %v", commandNames[req.typ], err))
}

func (t *transmission) write(req *request) error {
	n, err := t.exp.Backend.WriteAt(t.ctx, req.data, int64(req.off))
	if err == nil && n < len(req.data) {
		err = io.ErrShortWrite
	}
	return err
}

// readFull reads p at off from the backend; a short read that ends with
// io.EOF (or no error) is completed with zeroes.
func (t *transmission) readFull(p []byte, off int64) error {
	n, err := t.exp.Backend.ReadAt(t.ctx, p, off)
	if n < len(p) && (err == nil || errors.Is(err, io.EOF)) {
		clear(p[n:])
		return nil
	}
	if n == len(p) && errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// read answers NBD_CMD_READ. With structured replies, ranges the backend
// reports as zero are sent as holes unless the client asked for one chunk
// (NBD_CMD_FLAG_DF).
func (t *transmission) read(r *reply, req *request) {
	n := int(req.length)
	if n == 0 {
		if t.structured {
			r.chunk(req.cookie, replyFlagDone, replyTypeNone, 0)
		} else {
			r.simple(req.cookie, 0)
		}
		return
	}
	if t.mem != nil {
		t.readMemory(r, req)
		return
	}
	r.buf = t.ss.srv.buffers.Get(n)
	r.data = *r.buf
	if !t.structured {
		if err := t.readFull(r.data, int64(req.off)); err != nil {
			t.replyError(r, req, err)
			return
		}
		r.simple(req.cookie, 0)
		r.addData(0, n)
		return
	}
	var extents []Extent
	if req.flags&cmdFlagDF == 0 && t.exp.caps.sparseReads {
		// On error the read goes on as if all were data.
		extents, _ = t.extents(int64(req.off), int64(req.length), true)
	}
	if len(extents) <= 1 && (len(extents) == 0 || extents[0].Flags&ExtentZero == 0) {
		if err := t.readFull(r.data, int64(req.off)); err != nil {
			t.replyError(r, req, err)
			return
		}
		r.dataChunk(req.cookie, replyFlagDone, req.off, 0, n)
		return
	}
	// Read the data extents first, so that no error can arise once the
	// first chunk is queued.
	pos := 0
	for _, e := range extents {
		if e.Flags&ExtentZero == 0 {
			if err := t.readFull(r.data[pos:pos+int(e.Length)], int64(req.off)+int64(pos)); err != nil {
				t.replyError(r, req, err)
				return
			}
		}
		pos += int(e.Length)
	}
	if pos < n { // extents stopped short: the rest is read as data
		if err := t.readFull(r.data[pos:], int64(req.off)+int64(pos)); err != nil {
			t.replyError(r, req, err)
			return
		}
		extents = append(extents, Extent{Length: int64(n - pos)})
	}
	pos = 0
	for i, e := range extents {
		flags := uint16(0)
		if i == len(extents)-1 {
			flags = replyFlagDone
		}
		off := req.off + uint64(pos)
		if e.Flags&ExtentZero != 0 {
			r.holeChunk(req.cookie, flags, off, uint32(e.Length))
		} else {
			r.dataChunk(req.cookie, flags, off, pos, pos+int(e.Length))
		}
		pos += int(e.Length)
	}
}

// readMemory answers NBD_CMD_READ on a Memory served inline, finding its
// holes without a BlockStatus call: they become hole chunks for a
// structured reply without NBD_CMD_FLAG_DF, zeroes otherwise. The data of
// a small read is copied from the chunks into the connection's write
// buffer when the reply is written (before the next request is served).
// A larger one is copied into a payload buffer first and sent from there
// with writev: the kernel reading a payload buffer, which is reused, is
// much cheaper on some virtual machines than reading chunk pages it has
// not touched lately (a shadow page fault per page costs more than the
// copy).
func (t *transmission) readMemory(r *reply, req *request) {
	var err error
	t.pieces, err = t.mem.pieces(t.pieces[:0], int64(req.off), int(req.length))
	defer func() {
		clear(t.pieces)
		t.pieces = t.pieces[:0]
	}()
	if err != nil {
		t.replyError(r, req, err)
		return
	}
	copied := req.length > maxExtRead
	if copied {
		r.buf = t.ss.srv.buffers.Get(int(req.length))
		r.data = *r.buf
	}
	// data adds the payload bytes p, found at pos in the request.
	data := func(p []byte, pos int) {
		if copied {
			copy(r.data[pos:], p)
			r.addData(pos, pos+len(p))
		} else {
			r.addExt(p)
		}
	}
	if t.structured && req.flags&cmdFlagDF == 0 {
		pos := 0
		for i, p := range t.pieces {
			flags := uint16(0)
			if i == len(t.pieces)-1 {
				flags = replyFlagDone
			}
			off := req.off + uint64(pos)
			if p.data == nil {
				r.holeChunk(req.cookie, flags, off, uint32(p.hole))
				pos += p.hole
				continue
			}
			r.chunk(req.cookie, flags, replyTypeOffsetData, uint32(8+len(p.data)))
			var h [8]byte
			binary.BigEndian.PutUint64(h[:], off)
			r.addMeta(h[:])
			data(p.data, pos)
			pos += len(p.data)
		}
		return
	}
	if t.structured {
		r.chunk(req.cookie, replyFlagDone, replyTypeOffsetData, 8+req.length)
		var h [8]byte
		binary.BigEndian.PutUint64(h[:], req.off)
		r.addMeta(h[:])
	} else {
		r.simple(req.cookie, 0)
	}
	pos := 0
	for _, p := range t.pieces {
		if p.data != nil {
			data(p.data, pos)
			pos += len(p.data)
			continue
		}
		if copied {
			clear(r.data[pos : pos+p.hole])
			r.addData(pos, pos+p.hole)
			pos += p.hole
			continue
		}
		if t.zeros == nil {
			t.zeros = make([]byte, maxExtRead)
		}
		r.addExt(t.zeros[:p.hole]) // p.hole <= req.length <= maxExtRead
		pos += p.hole
	}
}

// maxExtRead is the largest read readMemory answers from the chunks
// directly: the reply then always fits the write buffer.
const maxExtRead = connWriterSize / 4

// Limits on the extents gathered for one request.
const (
	maxExtentCalls = 1024
	maxReplyExtent = 1<<32 - 1<<16 // largest descriptor, aligned to any block size
)

// extents gathers the allocation of [off, off+length) from the backend,
// merging neighbours with equal flags and stopping at the end of the
// export. With clip the extents end exactly at off+length (or earlier if
// the backend stopped short); without, the last one may run past it, as
// block status allows.
func (t *transmission) extents(off, length int64, clip bool) ([]Extent, error) {
	return t.gather(off, length, clip, "block status", func(pos, n int64) ([]Extent, error) {
		got, err := t.exp.caps.status.BlockStatus(t.ctx, pos, n)
		out := make([]Extent, len(got)) // the backend's slice stays its own
		for i, e := range got {
			out[i] = Extent{Length: e.Length, Flags: e.Flags & (ExtentHole | ExtentZero)}
		}
		return out, err
	})
}

// dirtyExtents gathers a dirty bitmap's ranges over [off, off+length)
// as extents (flag extentDirty), as extents does for allocation.
func (t *transmission) dirtyExtents(bitmap string, off, length int64) ([]Extent, error) {
	return t.gather(off, length, false, "dirty bitmap "+strconv.Quote(bitmap), func(pos, n int64) ([]Extent, error) {
		got, err := t.exp.caps.dirty.DirtyStatus(t.ctx, bitmap, pos, n)
		out := make([]Extent, len(got))
		for i, d := range got {
			out[i].Length = d.Length
			if d.Dirty {
				out[i].Flags = extentDirty
			}
		}
		return out, err
	})
}

// gather calls status from off until [off, off+length) (up to the end of
// the export) is covered, merging neighbours with equal flags, within
// maxExtentCalls calls and maxExtents extents; clip as extents says.
func (t *transmission) gather(off, length int64, clip bool, what string, status func(pos, n int64) ([]Extent, error)) ([]Extent, error) {
	size := t.exp.Backend.Size()
	end := min(off+length, size)
	var out []Extent
	pos := off
	for calls := 0; pos < end && calls < maxExtentCalls && len(out) < maxExtents; calls++ {
		got, err := status(pos, end-pos)
		if err != nil {
			return nil, err
		}
		if len(got) == 0 {
			return nil, fmt.Errorf("%s at %d: backend returned no extent", what, pos)
		}
		for _, e := range got {
			if e.Length <= 0 {
				return nil, fmt.Errorf("%s at %d: backend returned an empty extent", what, pos)
			}
			e.Length = min(e.Length, size-pos)
			if clip {
				e.Length = min(e.Length, end-pos)
			}
			if n := len(out); n > 0 && out[n-1].Flags == e.Flags {
				out[n-1].Length += e.Length
			} else {
				out = append(out, e)
			}
			pos += e.Length
			if pos >= end || len(out) >= maxExtents {
				break
			}
		}
	}
	return out, nil
}

// blockStatusReply answers NBD_CMD_BLOCK_STATUS: one chunk per selected
// context (base:allocation, dirty bitmaps), the last one flagged done;
// if any context fails, nothing but the error is sent.
func (t *transmission) blockStatusReply(r *reply, req *request) {
	if req.length == 0 {
		t.encodeError(r, req, ErrInvalid, "block status: empty range")
		return
	}
	descs := make([][]byte, 0, len(t.contexts))
	for _, c := range t.contexts {
		var extents []Extent
		var err error
		switch {
		case c.bitmap != "":
			extents, err = t.dirtyExtents(c.bitmap, int64(req.off), int64(req.length))
		case t.exp.caps.status != nil:
			extents, err = t.extents(int64(req.off), int64(req.length), false)
		default:
			extents = []Extent{{Length: int64(req.length)}}
		}
		if err != nil {
			t.replyError(r, req, err)
			return
		}
		descs = append(descs, encodeStatus(c.id, extents, req.length, req.flags&cmdFlagReqOne != 0))
	}
	for i, desc := range descs {
		var flags uint16
		if i == len(descs)-1 {
			flags = replyFlagDone
		}
		r.chunk(req.cookie, flags, replyTypeBlockStatus, uint32(len(desc)))
		r.addMeta(desc)
	}
}

// encodeStatus is the payload of a block status chunk: the context id,
// then a descriptor (length, flags) per extent, as far as length reaches
// (one descriptor with reqOne), at most maxExtents.
func encodeStatus(id uint32, extents []Extent, length uint32, reqOne bool) []byte {
	desc := make([]byte, 4, 4+8*min(len(extents), 64))
	binary.BigEndian.PutUint32(desc, id)
	var covered int64
	for _, e := range extents {
		for e.Length > 0 && covered < int64(length) {
			n := min(e.Length, maxReplyExtent)
			if reqOne {
				n = min(n, int64(length))
			}
			desc = binary.BigEndian.AppendUint32(desc, uint32(n))
			desc = binary.BigEndian.AppendUint32(desc, uint32(e.Flags))
			e.Length -= n
			covered += n
			if reqOne || (len(desc)-4)/8 >= maxExtents {
				break
			}
		}
		if reqOne || covered >= int64(length) || (len(desc)-4)/8 >= maxExtents {
			break
		}
	}
	return desc
}

// writeZeroes answers NBD_CMD_WRITE_ZEROES, through the backend's Zeroer
// or by writing zero buffers.
func (t *transmission) writeZeroes(req *request) error {
	var flags ZeroFlags
	if req.flags&cmdFlagNoHole != 0 {
		flags |= ZeroNoHole
	}
	if req.flags&cmdFlagFastZero != 0 {
		flags |= ZeroFast
	}
	if z := t.exp.caps.zero; z != nil {
		return z.Zero(t.ctx, int64(req.off), int64(req.length), flags)
	}
	if flags&ZeroFast != 0 {
		return ErrFastZeroUnsupported
	}
	return writeZeroBuffers(t.ctx, t.exp.Backend, t.ss.srv.buffers, int64(req.off), int64(req.length))
}
