package rawsock

import (
	"bytes"
	"math/rand/v2"
	"net"
	"runtime"
	"testing"

	"github.com/purerbd/purerbd/internal/rawsock/rawsocktest"
)

// TestSplice sends buffers by reference between copied writes to a slow
// reader through a 4 KiB send buffer, so that splices stop part way
// (EAGAIN) and resume, with buffers that start mid-page and are larger
// than the pipe, and checks the bytes and their order.
func TestSplice(t *testing.T) {
	rawsocktest.EachPair(t, func(t *testing.T, a, b net.Conn) {
		if err := a.(interface{ SetWriteBuffer(int) error }).SetWriteBuffer(4096); err != nil {
			t.Fatal(err)
		}
		s, err := NewSplicer()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		w := NewWriter(Of(a))
		rng := rand.New(rand.NewPCG(3, 4))
		var want bytes.Buffer
		var keep [][]byte // spliced memory stays untouched until it is read
		got := rawsocktest.SlowDrain(b)
		for i := range 18 {
			p := rawsocktest.RandomBytes(rng, rng.IntN(3000))
			if err := w.Writev(nil, [][]byte{p}); err != nil {
				t.Fatal(err)
			}
			want.Write(p)
			n := []int{0, 1, 4096, 128 << 10, pipeSize + 12345, 2 << 20}[i%6]
			q := rawsocktest.RandomBytes(rng, n+7)[rng.IntN(7):][:n] // mid-page starts
			keep = append(keep, q)
			if err := w.Splice(s, q); err != nil {
				t.Fatalf("splice of %d bytes: %v", n, err)
			}
			if s.pending != 0 {
				t.Fatalf("%d bytes left in the pipe after a splice returned", s.pending)
			}
			want.Write(q)
		}
		a.Close()
		if g := <-got; !bytes.Equal(g, want.Bytes()) {
			t.Fatalf("received %d bytes that differ from the %d sent", len(g), want.Len())
		}
		runtime.KeepAlive(keep)
	})
}
