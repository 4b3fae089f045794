package nbd

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// memoryChunkSize is the allocation unit of Memory: 64 KiB.
const memoryChunkSize = 64 << 10

// A Memory keeps its bytes in segments of 64 MiB of address space, made on
// the first write into them. On Linux a segment is an anonymous mapping
// outside the Go heap: its pages cost memory only once written, the
// garbage collector neither scans nor counts them, and a trim gives them
// back to the kernel at once (madvise). Elsewhere it is a heap slice.
const (
	memorySegmentShift = 26
	memorySegmentSize  = 1 << memorySegmentShift
	chunksPerSegment   = memorySegmentSize / memoryChunkSize
)

// Memory is a sparse in-memory Backend: data lives in 64 KiB chunks that
// are allocated on first write and freed by trim, so unwritten ranges
// cost nothing and are reported as holes. It is coherent across
// connections and never loses data on its own, so flush does nothing.
//
// Reads and writes take no export-wide lock: the size is an atomic value,
// the segment table is swapped whole when it grows, and each chunk has its
// own lock that orders the accesses to its bytes (so overlapping requests
// cannot race) and guards whether it is allocated.
type Memory struct {
	size      atomic.Int64
	table     atomic.Pointer[memoryTable]
	allocated atomic.Int64 // bytes in allocated chunks
	mu        sync.Mutex   // serializes Resize, table growth and segment creation
	notify    sizeWatchers
}

// memoryTable holds one slot per segment of the largest size the Memory
// has had. Slots are filled once and never emptied; the table is replaced
// by a longer copy when the Memory grows past it.
type memoryTable []atomic.Pointer[memorySegment]

// memorySegment is 64 MiB of data and the state of its chunks. Its data is
// released (unmapped) by a cleanup once the segment is unreachable; code
// that touches data keeps the segment alive until it is done, for example
// by unlocking one of its chunks afterwards.
type memorySegment struct {
	data   []byte
	chunks [chunksPerSegment]memoryChunk
}

// memoryChunk orders the accesses to one chunk's bytes. allocated is
// written under mu and may be read without it (by BlockStatus).
type memoryChunk struct {
	mu        sync.RWMutex
	allocated atomic.Bool
}

// NewMemory returns an empty (all zero) Memory of the given size.
func NewMemory(size int64) (*Memory, error) {
	if size < 0 {
		return nil, fmt.Errorf("nbd: memory backend size %d is negative", size)
	}
	m := &Memory{}
	m.size.Store(size)
	t := make(memoryTable, segmentsFor(size))
	m.table.Store(&t)
	return m, nil
}

// segmentsFor is the number of segments that hold size bytes.
func segmentsFor(size int64) int64 {
	return (size + memorySegmentSize - 1) >> memorySegmentShift
}

// Size returns the current size.
func (m *Memory) Size() int64 { return m.size.Load() }

// segment returns segment i, or nil for one not made yet.
func (m *Memory) segment(i int64) *memorySegment {
	if t := *m.table.Load(); i < int64(len(t)) {
		return t[i].Load()
	}
	return nil
}

// makeSegment returns segment i, making it if needed.
func (m *Memory) makeSegment(i int64) (*memorySegment, error) {
	if s := m.segment(i); s != nil {
		return s, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.growTable(i + 1)
	slot := &(*m.table.Load())[i]
	if s := slot.Load(); s != nil {
		return s, nil
	}
	data, err := mapSegment(memorySegmentSize)
	if err != nil {
		return nil, fmt.Errorf("nbd: memory segment of %d bytes: %w: %w", memorySegmentSize, err, ErrNoSpace)
	}
	s := &memorySegment{data: data}
	runtime.AddCleanup(s, unmapSegment, data)
	slot.Store(s)
	return s, nil
}

// growTable makes the table hold at least n segments; m.mu is held.
func (m *Memory) growTable(n int64) {
	old := *m.table.Load()
	if n <= int64(len(old)) {
		return
	}
	t := make(memoryTable, n)
	for i := range old {
		t[i].Store(old[i].Load())
	}
	m.table.Store(&t)
}

// locate splits a position into its segment number, the offset in the
// segment, and the chunk number in the segment.
func locate(pos int64) (seg int64, in, chunk int) {
	in = int(pos & (memorySegmentSize - 1))
	return pos >> memorySegmentShift, in, in / memoryChunkSize
}

func (m *Memory) check(off int64, n int) error {
	if size := m.Size(); off < 0 || off+int64(n) > size {
		return fmt.Errorf("nbd: memory range %d+%d outside size %d: %w", off, n, size, ErrInvalid)
	}
	return nil
}

// ReadAt copies out of the chunks; holes read as zeroes.
func (m *Memory) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	if err := m.check(off, len(p)); err != nil {
		return 0, err
	}
	done := 0
	for done < len(p) {
		si, in, ci := locate(off + int64(done))
		n := min(len(p)-done, memoryChunkSize-in%memoryChunkSize)
		if s := m.segment(si); s != nil {
			c := &s.chunks[ci]
			c.mu.RLock()
			if c.allocated.Load() {
				copy(p[done:done+n], s.data[in:in+n])
			} else {
				clear(p[done : done+n])
			}
			c.mu.RUnlock()
		} else {
			clear(p[done : done+n])
		}
		done += n
	}
	return done, nil
}

// memPiece is one piece of a range of a Memory: bytes of its chunks, or
// hole bytes that read as zeroes.
type memPiece struct {
	data []byte
	hole int
}

// pieces appends to dst the pieces [off, off+n) is made of, neighbours of
// one kind merged: allocated chunks as slices of their memory (adjacent
// chunks of one segment are one slice), unallocated ones as holes. The
// bytes are not copied and no lock is held: a reply sent from them while
// another connection writes there may carry old and new bytes, which is
// what overlapping requests in flight may get. A trim meanwhile makes the
// pages read as zeroes; the mappings stay while m lives.
func (m *Memory) pieces(dst []memPiece, off int64, n int) ([]memPiece, error) {
	if err := m.check(off, n); err != nil {
		return dst, err
	}
	first := len(dst)
	var prev *memorySegment // segment of the last data piece, ending at prevEnd
	prevEnd := 0
	for done := 0; done < n; {
		si, in, ci := locate(off + int64(done))
		k := min(n-done, memoryChunkSize-in%memoryChunkSize)
		done += k
		s := m.segment(si)
		if s != nil && !s.chunks[ci].allocated.Load() {
			s = nil
		}
		last := len(dst) - 1
		switch {
		case s == nil && last >= first && dst[last].data == nil:
			dst[last].hole += k
		case s == nil:
			dst = append(dst, memPiece{hole: k})
		case last >= first && dst[last].data != nil && s == prev && in == prevEnd:
			dst[last].data = s.data[in-len(dst[last].data) : in+k]
		default:
			dst = append(dst, memPiece{data: s.data[in : in+k]})
		}
		if s != nil {
			prev, prevEnd = s, in+k
		}
	}
	return dst, nil
}

// WriteAt copies into the chunks, allocating them as needed.
func (m *Memory) WriteAt(_ context.Context, p []byte, off int64) (int, error) {
	if err := m.check(off, len(p)); err != nil {
		return 0, err
	}
	done := 0
	for done < len(p) {
		si, in, ci := locate(off + int64(done))
		n := min(len(p)-done, memoryChunkSize-in%memoryChunkSize)
		s, err := m.makeSegment(si)
		if err != nil {
			return done, err
		}
		c := &s.chunks[ci]
		c.mu.Lock()
		if !c.allocated.Load() {
			start := in - in%memoryChunkSize
			populatePages(s.data[start : start+memoryChunkSize])
		}
		copy(s.data[in:in+n], p[done:done+n])
		m.markAllocated(c)
		c.mu.Unlock()
		done += n
	}
	return done, nil
}

// markAllocated records that chunk c holds data; c.mu is held.
func (m *Memory) markAllocated(c *memoryChunk) {
	if !c.allocated.Load() {
		c.allocated.Store(true)
		m.allocated.Add(memoryChunkSize)
	}
}

// Flush does nothing: memory has no cache to write back.
func (m *Memory) Flush(context.Context) error { return nil }

// Trim frees the chunks the range covers whole and zeroes the partial
// ends, so a trimmed range reads as zeroes.
func (m *Memory) Trim(_ context.Context, off, length int64) error {
	if err := m.check(off, 0); err != nil {
		return err
	}
	return m.punch(off, length, true)
}

// Zero makes the range read as zeroes: by freeing whole chunks, or, with
// ZeroNoHole, by zeroing them in place (allocating them). Both are fast.
func (m *Memory) Zero(_ context.Context, off, length int64, flags ZeroFlags) error {
	if size := m.Size(); length < 0 || off < 0 || off > size || off+length > size {
		return fmt.Errorf("nbd: memory zero %d+%d outside size %d: %w", off, length, size, ErrInvalid)
	}
	return m.punch(off, length, flags&ZeroNoHole == 0)
}

// punch zeroes [off, off+length); whole chunks are freed when free is set
// and otherwise zeroed (and allocated) in place.
func (m *Memory) punch(off, length int64, free bool) error {
	end := min(off+length, m.Size())
	for pos := off; pos < end; {
		si, in, ci := locate(pos)
		n := min(int(end-pos), memoryChunkSize-in%memoryChunkSize)
		pos += int64(n)
		s := m.segment(si)
		if s == nil && free {
			continue // never written: reads as zeroes already
		}
		if s == nil {
			var err error
			if s, err = m.makeSegment(si); err != nil {
				return err
			}
		}
		c := &s.chunks[ci]
		c.mu.Lock()
		switch {
		case free && !c.allocated.Load():
		case free && n == memoryChunkSize:
			m.release(s, c, in)
		default:
			clear(s.data[in : in+n])
			m.markAllocated(c)
		}
		c.mu.Unlock()
	}
	return nil
}

// release frees allocated chunk c, which starts at offset in of segment s;
// c.mu is held.
func (m *Memory) release(s *memorySegment, c *memoryChunk, in int) {
	dropPages(s.data[in : in+memoryChunkSize])
	c.allocated.Store(false)
	m.allocated.Add(-memoryChunkSize)
}

// BlockStatus reports unallocated chunks as holes that read as zero and
// allocated ones as data. It looks at no more than 1 GiB per call.
func (m *Memory) BlockStatus(_ context.Context, off, length int64) ([]Extent, error) {
	if err := m.check(off, 0); err != nil {
		return nil, err
	}
	end := min(off+min(length, 1<<30), m.Size())
	var out []Extent
	for pos := off; pos < end; {
		si, in, ci := locate(pos)
		n := min(end-pos, int64(memoryChunkSize-in%memoryChunkSize))
		f := ExtentHole | ExtentZero
		if s := m.segment(si); s != nil && s.chunks[ci].allocated.Load() {
			f = 0
		}
		if k := len(out); k > 0 && out[k-1].Flags == f {
			out[k-1].Length += n
		} else {
			out = append(out, Extent{Length: n, Flags: f})
		}
		pos += n
	}
	return out, nil
}

// MultiConnCoherent is true: every connection sees the same bytes.
func (m *Memory) MultiConnCoherent() bool { return true }

// Resize changes the size. Shrinking frees the chunks past the end and
// zeroes the tail of the last one, so growing again reads zeroes.
func (m *Memory) Resize(_ context.Context, size int64) error {
	if size < 0 {
		return fmt.Errorf("nbd: memory resize to %d: %w", size, ErrInvalid)
	}
	m.mu.Lock()
	old := m.size.Load()
	m.growTable(segmentsFor(size))
	m.size.Store(size)
	if size < old {
		m.freeFrom(size, old)
	}
	m.mu.Unlock()
	if size != old {
		m.notify.changed(size)
	}
	return nil
}

// freeFrom frees the chunks in [size, old) and zeroes the tail of the
// chunk that holds size; m.mu is held.
func (m *Memory) freeFrom(size, old int64) {
	t := *m.table.Load()
	for pos := size; pos < old; {
		si, in, ci := locate(pos)
		chunkStart := in - in%memoryChunkSize
		next := pos - int64(in) + int64(chunkStart) + memoryChunkSize
		if si >= int64(len(t)) {
			return
		}
		s := t[si].Load()
		if s == nil {
			pos = (si + 1) << memorySegmentShift
			continue
		}
		c := &s.chunks[ci]
		c.mu.Lock()
		if c.allocated.Load() {
			if in == chunkStart {
				m.release(s, c, in)
			} else {
				clear(s.data[in : chunkStart+memoryChunkSize])
			}
		}
		c.mu.Unlock()
		pos = next
	}
}

// NotifySize calls fn after every change of size.
func (m *Memory) NotifySize(fn func(size int64)) (cancel func()) {
	return m.notify.add(fn)
}

// AllocatedBytes is the memory held by data chunks.
func (m *Memory) AllocatedBytes() int64 { return m.allocated.Load() }
