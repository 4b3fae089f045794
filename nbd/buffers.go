package nbd

import (
	"math/bits"
	"sync"
)

// bufferPool recycles payload buffers by power-of-two size class, from
// 4 KiB to DefaultMaxPayload, so that steady traffic allocates nothing.
type bufferPool struct {
	classes [bufferClasses]sync.Pool
}

const (
	minBufferShift = 12 // 4 KiB
	maxBufferShift = 25 // 32 MiB
	bufferClasses  = maxBufferShift - minBufferShift + 1
)

// get returns a buffer of length n (n <= DefaultMaxPayload). Its contents
// are not zeroed.
func (p *bufferPool) get(n int) *[]byte {
	c := sizeClass(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if v, ok := p.classes[c].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<(c+minBufferShift))
	return &b
}

// put gives a buffer back; nil is ignored.
func (p *bufferPool) put(b *[]byte) {
	if b == nil {
		return
	}
	c := sizeClass(cap(*b))
	if c < 0 || cap(*b) != 1<<(c+minBufferShift) {
		return
	}
	p.classes[c].Put(b)
}

// sizeClass is the class holding n bytes, or -1 when n is out of range.
func sizeClass(n int) int {
	if n <= 0 || n > 1<<maxBufferShift {
		return -1
	}
	shift := bits.Len(uint(n - 1))
	if shift < minBufferShift {
		shift = minBufferShift
	}
	return shift - minBufferShift
}
