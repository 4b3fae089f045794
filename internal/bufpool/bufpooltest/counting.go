// Package bufpooltest holds a buffer pool for tests that counts what it
// lends and gets back, to check that a user of an injected pool (an
// nbd.BufferPool, an rbd.BufferPool) borrows from it and returns every
// buffer.
package bufpooltest

import "sync/atomic"

// Counting lends fresh buffers and counts Get calls and the non-nil
// buffers Put back. The zero value is ready for use.
type Counting struct {
	gets, puts atomic.Int64
}

// Get returns a new buffer of length n.
func (p *Counting) Get(n int) *[]byte {
	p.gets.Add(1)
	b := make([]byte, n)
	return &b
}

// Put counts b unless it is nil.
func (p *Counting) Put(b *[]byte) {
	if b != nil {
		p.puts.Add(1)
	}
}

// Lent returns the buffers lent so far and those given back.
func (p *Counting) Lent() (gets, puts int64) {
	return p.gets.Load(), p.puts.Load()
}
