package rbd

import (
	"math/bits"
	"sync"
	"unsafe"
)

// bufferPool recycles the copies of acknowledged writes' data, in
// power-of-two size classes from 4 KiB, keeping at most limit bytes
// between writes (a sync.Pool would hand large buffers back to the
// garbage collector, and fresh memory costs page faults and zeroing on
// every reuse).
//
// New buffers are cut from slabs aligned to transparent huge pages and
// advised as such, so that the first touch of fresh memory costs a page
// fault per 2 MiB rather than per 4 KiB (page faults are costly on
// virtual machines with shadow paging).
type bufferPool struct {
	mu    sync.Mutex
	free  [][][]byte // by class
	rest  [][]byte   // by class: what is left of the class's current slab
	kept  int64
	limit int64
}

const (
	minBufShift = 12
	// hugePageSize is the size of a transparent huge page with 4 KiB
	// base pages (x86-64, arm64), to which slabs are aligned.
	hugePageSize = 2 << 20
	// slabSize is the least a slab holds: two huge pages.
	slabSize = 2 * hugePageSize
)

func bufClass(n int) int {
	if n <= 1<<minBufShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minBufShift
}

func (p *bufferPool) get(n int) []byte {
	c := bufClass(n)
	p.mu.Lock()
	defer p.mu.Unlock()
	if c < len(p.free) {
		if l := len(p.free[c]); l > 0 {
			b := p.free[c][l-1]
			p.free[c] = p.free[c][:l-1]
			p.kept -= int64(cap(b))
			return b[:n]
		}
	}
	return p.carveLocked(c)[:n]
}

// carveLocked cuts a new buffer of class c from the class's slab,
// starting a new slab when the current one is used up.
func (p *bufferPool) carveLocked(c int) []byte {
	size := 1 << (c + minBufShift)
	for len(p.rest) <= c {
		p.rest = append(p.rest, nil)
	}
	if len(p.rest[c]) < size {
		p.rest[c] = newSlab(max(size, slabSize))
	}
	b := p.rest[c][:size:size]
	p.rest[c] = p.rest[c][size:]
	return b
}

func (p *bufferPool) put(b []byte) {
	c := bufClass(cap(b))
	if cap(b) != 1<<(c+minBufShift) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept+int64(cap(b)) > p.limit {
		return
	}
	for len(p.free) <= c {
		p.free = append(p.free, nil)
	}
	p.free[c] = append(p.free[c], b[:cap(b)])
	p.kept += int64(cap(b))
}

// drop forgets the kept buffers and the rest of the slabs (the image is
// closing); buffers still in use stay valid.
func (p *bufferPool) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free, p.rest, p.kept = nil, nil, 0
}

// newSlab returns n bytes of Go heap that start on a huge page boundary,
// advised for huge pages. The memory stays the garbage collector's: a
// slab lives while any buffer cut from it does. The allocation is a huge
// page larger than n so that the aligned range fits in it; the slack is
// never touched, so it costs address space, not memory.
func newSlab(n int) []byte {
	b := make([]byte, n+hugePageSize)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (hugePageSize - 1))
	s := b[off : off+n : off+n]
	adviseHugePages(s)
	return s
}
