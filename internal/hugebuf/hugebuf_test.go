package hugebuf

import (
	"bytes"
	"runtime"
	"testing"
)

// TestAlloc checks both kinds of buffer: zeroed, writable, of the
// length asked, and freed once.
func TestAlloc(t *testing.T) {
	for _, n := range []int{4096, minHuge - 1, minHuge, 4 << 20, 4<<20 + 12345} {
		b := Alloc(n)
		p := b.Bytes()
		if len(p) != n {
			t.Fatalf("Alloc(%d): %d bytes", n, len(p))
		}
		if want := n >= minHuge && runtime.GOOS == "linux"; b.Huge() != want {
			t.Errorf("Alloc(%d).Huge() = %v, want %v", n, b.Huge(), want)
		}
		if !bytes.Equal(p, make([]byte, n)) {
			t.Fatalf("Alloc(%d): not zeroed", n)
		}
		for i := range p {
			p[i] = byte(i)
		}
		if p[n-1] != byte(n-1) {
			t.Fatalf("Alloc(%d): last byte not written", n)
		}
		if err := b.Free(); err != nil {
			t.Fatalf("Free: %v", err)
		}
		if b.Bytes() != nil || b.Huge() {
			t.Fatalf("after Free: %d bytes, huge %v", len(b.Bytes()), b.Huge())
		}
		if err := b.Free(); err != nil {
			t.Fatalf("second Free: %v", err)
		}
	}
}
