// Package bufpool recycles byte buffers by power-of-two size class
// through the garbage collector's pools: steady traffic allocates
// nothing, and what an idle user held goes back to the collector within
// two cycles. It serves the NBD server's payloads, the ublk queues'
// requests and the rbd package's merged writes.
package bufpool

import (
	"math/bits"
	"sync"
)

const (
	minShift = 12 // 4 KiB
	maxShift = 25 // 32 MiB
	classes  = maxShift - minShift + 1
)

// Pool recycles buffers from 4 KiB to 32 MiB. The zero value is ready
// for use.
type Pool struct {
	classes [classes]sync.Pool // of *[]byte
}

// Get returns a buffer of length n whose capacity is n rounded up to a
// power of two (n outside the classes gets a buffer of its own). Its
// contents are not zeroed.
func (p *Pool) Get(n int) *[]byte {
	c := sizeClass(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if v, ok := p.classes[c].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<(c+minShift))
	return &b
}

// Put gives a buffer back; nil, and a buffer Get did not make, are
// dropped.
func (p *Pool) Put(b *[]byte) {
	if b == nil {
		return
	}
	c := sizeClass(cap(*b))
	if c < 0 || cap(*b) != 1<<(c+minShift) {
		return
	}
	p.classes[c].Put(b)
}

// sizeClass is the class holding n bytes, or -1 when n is out of range.
func sizeClass(n int) int {
	if n <= 0 || n > 1<<maxShift {
		return -1
	}
	shift := bits.Len(uint(n - 1))
	if shift < minShift {
		shift = minShift
	}
	return shift - minShift
}
