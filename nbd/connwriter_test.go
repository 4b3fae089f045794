package nbd

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/rawsock"
)

// unixPair returns the two ends of a Unix stream connection.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *net.UnixConn, 1)
	go func() {
		c, _ := l.AcceptUnix()
		accepted <- c
	}()
	a, err := net.DialUnix("unix", nil, l.Addr().(*net.UnixAddr))
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestConnWriterRawPartialWrites sends small and large writes and vectors
// through a socket with a small send buffer to a slow reader, so that
// writes and writevs stop part way (EAGAIN) and resume, and checks the
// bytes and their order.
func TestConnWriterRawPartialWrites(t *testing.T) {
	a, b := unixPair(t)
	if err := a.SetWriteBuffer(4096); err != nil {
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
	got := make(chan []byte, 1)
	go func() {
		var buf bytes.Buffer
		p := make([]byte, 3000)
		for {
			n, err := b.Read(p)
			buf.Write(p[:n])
			if err != nil {
				got <- buf.Bytes()
				return
			}
			if buf.Len()%7 == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	random := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
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

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
