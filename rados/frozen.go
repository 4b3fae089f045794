package rados

import (
	"sync"

	"github.com/purerbd/purerbd/rados/crc32c"
)

// Frozen is a buffer whose owner will not change it again, so that the
// crc32c the messenger puts on the data it sends (in crc mode, every
// byte of every write) is computed once per range rather than once per
// send. librbd gets the same from its reference-counted buffers, which
// cache their crcs until written to: `rbd bench` sends one buffer for
// every write and checksums it once.
//
// A program that writes the same bytes many times (a benchmark, a fill
// pattern, a template) freezes them once and writes the Frozen. Changing
// the bytes afterwards breaks the promise: every write of them carries a
// crc that no longer matches, and the OSD drops the connection each time
// it is sent, until the write's context ends.
//
// A Frozen is safe for concurrent use.
type Frozen struct {
	b    []byte
	mu   sync.Mutex
	sums map[frozenRange]uint32
}

type frozenRange struct{ off, n int }

// maxFrozenSums bounds the ranges whose crcs a Frozen keeps: a striped
// image cuts a buffer into a handful of ranges; past this, a sum is
// computed each time rather than kept.
const maxFrozenSums = 64

// Freeze returns b as a Frozen. The caller must not change b afterwards.
func Freeze(b []byte) *Frozen { return &Frozen{b: b} }

// Bytes returns the frozen bytes, which nobody may change.
func (f *Frozen) Bytes() []byte { return f.b }

// Checksum returns crc32c.Checksum(f.Bytes()[off:off+n]), the crc msgr2
// puts on a data segment, computing it the first time it is asked for
// that range only. It panics when the range is out of bounds, as slicing
// would.
func (f *Frozen) Checksum(off, n int) uint32 {
	p := f.b[off : off+n]
	k := frozenRange{off, n}
	f.mu.Lock()
	s, ok := f.sums[k]
	f.mu.Unlock()
	if ok {
		return s
	}
	s = crc32c.Checksum(p)
	f.mu.Lock()
	if f.sums == nil {
		f.sums = make(map[frozenRange]uint32)
	}
	if len(f.sums) < maxFrozenSums {
		f.sums[k] = s
	}
	f.mu.Unlock()
	return s
}
