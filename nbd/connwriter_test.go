package nbd

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/purerbd/purerbd/internal/rawsock"
	"github.com/purerbd/purerbd/internal/rawsock/rawsocktest"
)

// TestConnWriterRawPartialWrites sends small and large writes and vectors
// through a socket with a small send buffer to a slow reader, so that
// writes and writevs stop part way (EAGAIN) and resume, and checks the
// bytes and their order.
func TestConnWriterRawPartialWrites(t *testing.T) {
	a, b := rawsocktest.UnixPair(t)
	if err := a.(*net.UnixConn).SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	rc := rawsock.Of(a)
	if rc == nil {
		t.Log("no raw system calls on this system: testing the net.Conn path")
	}
	var raw *rawsock.Writer
	var w io.Writer = a
	if rc != nil {
		raw = rawsock.NewWriter(rc)
		w = raw
	}
	cw := newConnWriter(w, raw)

	rng := rand.New(rand.NewPCG(1, 2))
	var want bytes.Buffer
	got := rawsocktest.SlowDrain(b)
	random := func(n int) []byte { return rawsocktest.RandomBytes(rng, n) }
	for i := 0; i < 300; i++ {
		switch i % 3 {
		case 0: // one write, small or larger than the buffer
			p := random(rng.IntN(3 * connWriterSize / 2))
			if _, err := cw.Write(p); err != nil {
				t.Fatal(err)
			}
			want.Write(p)
		case 1: // a vector with empty slices, small or over the buffer
			var vec [][]byte
			for k := rng.IntN(6); k >= 0; k-- {
				p := random([]int{0, 1, 20, 4096, 70000}[rng.IntN(5)])
				vec = append(vec, p)
				want.Write(p)
			}
			if err := cw.WriteVec(vec); err != nil {
				t.Fatal(err)
			}
		default:
			if rng.IntN(4) == 0 {
				if err := cw.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := cw.Flush(); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if g := <-got; !bytes.Equal(g, want.Bytes()) {
		t.Fatalf("received %d bytes that differ from the %d sent", len(g), want.Len())
	}
}
