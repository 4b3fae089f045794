package hugebuf

// Buffer is memory from Alloc. Its Bytes stay valid until Free.
type Buffer struct {
	b      []byte
	mapped bool // b is a mapping of its own, which Free unmaps
}

// Bytes returns the buffer's memory.
func (b *Buffer) Bytes() []byte { return b.b }

// Huge reports whether the buffer was mapped for huge pages (the
// kernel backs it with them when it can; a fallback to the Go heap
// reports false).
func (b *Buffer) Huge() bool { return b.mapped }

// Free gives the memory back; the buffer's bytes must not be used
// after it. Freeing twice is a no-op.
func (b *Buffer) Free() error {
	if b.b == nil {
		return nil
	}
	p, mapped := b.b, b.mapped
	b.b, b.mapped = nil, false
	if !mapped {
		return nil
	}
	return unmap(p)
}

// minHuge is the smallest buffer worth a mapping of its own: below one
// huge page there is nothing to gain.
const minHuge = 2 << 20

// Alloc returns a zeroed buffer of n bytes: mapped and advised for huge
// pages when n is at least one huge page and the system allows it, from
// the Go heap otherwise.
func Alloc(n int) *Buffer {
	if n >= minHuge {
		if p, ok := mapHuge(n); ok {
			return &Buffer{b: p, mapped: true}
		}
	}
	return &Buffer{b: make([]byte, n)}
}
