package nbd

import (
	"context"
	"fmt"
	"sync"
)

// memoryChunkSize is the allocation unit of Memory: 64 KiB.
const memoryChunkSize = 64 << 10

// Memory is a sparse in-memory Backend: data lives in 64 KiB chunks that
// are allocated on first write and freed by trim, so unwritten ranges
// cost nothing and are reported as holes. It is coherent across
// connections and never loses data on its own, so flush does nothing.
type Memory struct {
	mu     sync.RWMutex // guards size and the chunks map
	size   int64
	chunks map[int64]*memoryChunk
	notify sizeWatchers
}

// memoryChunk is one allocated chunk; its lock orders the accesses to its
// bytes so that overlapping requests cannot race.
type memoryChunk struct {
	mu   sync.RWMutex
	data [memoryChunkSize]byte
}

// NewMemory returns an empty (all zero) Memory of the given size.
func NewMemory(size int64) (*Memory, error) {
	if size < 0 {
		return nil, fmt.Errorf("nbd: memory backend size %d is negative", size)
	}
	return &Memory{size: size, chunks: make(map[int64]*memoryChunk)}, nil
}

// Size returns the current size.
func (m *Memory) Size() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.size
}

// chunk returns chunk i, allocating it when create is set (else nil for a
// hole).
func (m *Memory) chunk(i int64, create bool) *memoryChunk {
	m.mu.RLock()
	c := m.chunks[i]
	m.mu.RUnlock()
	if c != nil || !create {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c = m.chunks[i]; c == nil {
		c = new(memoryChunk)
		m.chunks[i] = c
	}
	return c
}

func (m *Memory) check(off int64, n int) error {
	if off < 0 || off+int64(n) > m.Size() {
		return fmt.Errorf("nbd: memory range %d+%d outside size %d: %w", off, n, m.Size(), ErrInvalid)
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
		pos := off + int64(done)
		i, in := pos/memoryChunkSize, int(pos%memoryChunkSize)
		n := min(len(p)-done, memoryChunkSize-in)
		if c := m.chunk(i, false); c != nil {
			c.mu.RLock()
			copy(p[done:done+n], c.data[in:in+n])
			c.mu.RUnlock()
		} else {
			clear(p[done : done+n])
		}
		done += n
	}
	return done, nil
}

// WriteAt copies into the chunks, allocating them as needed.
func (m *Memory) WriteAt(_ context.Context, p []byte, off int64) (int, error) {
	if err := m.check(off, len(p)); err != nil {
		return 0, err
	}
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		i, in := pos/memoryChunkSize, int(pos%memoryChunkSize)
		n := min(len(p)-done, memoryChunkSize-in)
		c := m.chunk(i, true)
		c.mu.Lock()
		copy(c.data[in:in+n], p[done:done+n])
		c.mu.Unlock()
		done += n
	}
	return done, nil
}

// Flush does nothing: memory has no cache to write back.
func (m *Memory) Flush(context.Context) error { return nil }

// Trim frees the chunks the range covers whole and zeroes the partial
// ends, so a trimmed range reads as zeroes.
func (m *Memory) Trim(_ context.Context, off, length int64) error {
	if err := m.check(off, 0); err != nil {
		return err
	}
	m.punch(off, length, true)
	return nil
}

// Zero makes the range read as zeroes: by freeing whole chunks, or, with
// ZeroNoHole, by zeroing them in place (allocating them). Both are fast.
func (m *Memory) Zero(_ context.Context, off, length int64, flags ZeroFlags) error {
	if length < 0 || m.check(off, 0) != nil || off+length > m.Size() {
		return fmt.Errorf("nbd: memory zero %d+%d outside size %d: %w", off, length, m.Size(), ErrInvalid)
	}
	m.punch(off, length, flags&ZeroNoHole == 0)
	return nil
}

// punch zeroes [off, off+length); whole chunks are freed when free is set
// and otherwise zeroed (and allocated) in place.
func (m *Memory) punch(off, length int64, free bool) {
	end := min(off+length, m.Size())
	for pos := off; pos < end; {
		i, in := pos/memoryChunkSize, pos%memoryChunkSize
		n := min(end-pos, memoryChunkSize-in)
		whole := in == 0 && n == memoryChunkSize
		switch {
		case whole && free:
			m.mu.Lock()
			delete(m.chunks, i)
			m.mu.Unlock()
		default:
			if c := m.chunk(i, !free); c != nil {
				c.mu.Lock()
				clear(c.data[in : in+n])
				c.mu.Unlock()
			}
		}
		pos += n
	}
}

// BlockStatus reports unallocated chunks as holes that read as zero and
// allocated ones as data. It looks at no more than 1 GiB per call.
func (m *Memory) BlockStatus(_ context.Context, off, length int64) ([]Extent, error) {
	if err := m.check(off, 0); err != nil {
		return nil, err
	}
	end := min(off+min(length, 1<<30), m.Size())
	var out []Extent
	m.mu.RLock()
	defer m.mu.RUnlock()
	for pos := off; pos < end; {
		i, in := pos/memoryChunkSize, pos%memoryChunkSize
		n := min(end-pos, memoryChunkSize-in)
		f := ExtentFlags(0)
		if m.chunks[i] == nil {
			f = ExtentHole | ExtentZero
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
	old := m.size
	if size < old {
		for i := range m.chunks {
			if i*memoryChunkSize >= size {
				delete(m.chunks, i)
			}
		}
		if c := m.chunks[size/memoryChunkSize]; c != nil {
			c.mu.Lock()
			clear(c.data[size%memoryChunkSize:])
			c.mu.Unlock()
		}
	}
	m.size = size
	m.mu.Unlock()
	if size != old {
		m.notify.changed(size)
	}
	return nil
}

// NotifySize calls fn after every change of size.
func (m *Memory) NotifySize(fn func(size int64)) (cancel func()) {
	return m.notify.add(fn)
}

// AllocatedBytes is the memory held by data chunks.
func (m *Memory) AllocatedBytes() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return int64(len(m.chunks)) * memoryChunkSize
}
