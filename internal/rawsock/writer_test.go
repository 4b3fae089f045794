package rawsock

import (
	"bytes"
	"math/rand/v2"
	"net"
	"runtime"
	"testing"

	"github.com/purerbd/purerbd/internal/rawsock/rawsocktest"
)

// TestWriterPartialWrites sends writes and vectors, with empty slices
// and slices larger than the socket's send buffer, to a slow reader, so
// that they stop part way (EAGAIN) and resume, and checks the bytes, their
// order, and that Writev leaves its vector as it was.
func TestWriterPartialWrites(t *testing.T) {
	rawsocktest.EachPair(t, func(t *testing.T, a, b net.Conn) {
		rc := Of(a)
		if rc == nil {
			if rawSyscalls {
				t.Fatal("no raw socket on a", a.LocalAddr().Network(), "connection")
			}
			return // no raw system calls here, and Of says so
		}
		rawsocktest.SmallSendBuffer(t, a)
		testWriterPartialWrites(t, NewWriter(rc), a, b)
	})
}

func testWriterPartialWrites(t *testing.T, w *Writer, a, b net.Conn) {
	rng := rand.New(rand.NewPCG(1, 2))
	var want bytes.Buffer
	got := rawsocktest.SlowDrain(b)
	random := func(n int) []byte { return rawsocktest.RandomBytes(rng, n) }
	for i := range 200 {
		if i%2 == 0 {
			p := random(rng.IntN(100000))
			if n, err := w.Write(p); err != nil || n != len(p) {
				t.Fatalf("write of %d bytes: %d, %v", len(p), n, err)
			}
			want.Write(p)
			continue
		}
		head := random([]int{0, 16, 5000}[rng.IntN(3)])
		want.Write(head)
		var vec, orig [][]byte
		for k := rng.IntN(6); k >= 0; k-- {
			p := random([]int{0, 1, 20, 4096, 70000}[rng.IntN(5)])
			vec = append(vec, p)
			orig = append(orig, p)
			want.Write(p)
		}
		if err := w.Writev(head, vec); err != nil {
			t.Fatal(err)
		}
		for k := range vec {
			if len(vec[k]) != len(orig[k]) || (len(vec[k]) > 0 && &vec[k][0] != &orig[k][0]) {
				t.Fatalf("Writev changed slice %d of its vector", k)
			}
		}
	}
	a.Close()
	if g := <-got; !bytes.Equal(g, want.Bytes()) {
		t.Fatalf("received %d bytes that differ from the %d sent", len(g), want.Len())
	}
}

// TestSplice sends buffers by reference between copied writes to a slow
// reader through a 4 KiB send buffer, so that splices stop part way
// (EAGAIN) and resume, with buffers that start mid-page and are larger
// than the pipe, and checks the bytes and their order.
func TestSplice(t *testing.T) {
	rawsocktest.EachPair(t, func(t *testing.T, a, b net.Conn) {
		rawsocktest.SmallSendBuffer(t, a)
		s, err := NewSplicer()
		if err != nil {
			if rawSyscalls {
				t.Fatal(err)
			}
			return // no splice here, and NewSplicer says so
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
			n := []int{0, 1, 4096, 128 << 10, 1<<20 + 12345, 2 << 20}[i%6]
			q := rawsocktest.RandomBytes(rng, n+7)[rng.IntN(7):][:n] // mid-page starts
			keep = append(keep, q)
			if err := w.Splice(s, q); err != nil {
				t.Fatalf("splice of %d bytes: %v", n, err)
			}
			if n := s.buffered(); n != 0 {
				t.Fatalf("%d bytes left in the pipe after a splice returned", n)
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
