// Package rawsocktest makes connected socket pairs and slow readers for
// tests of code that writes sockets with package rawsock.
package rawsocktest

import (
	"bytes"
	"math/rand/v2"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// UnixPair returns the two ends of a Unix stream connection, closed when
// the test ends.
func UnixPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	return acceptPair(t, l)
}

// TCPPair returns the two ends of a TCP connection on loopback, closed
// when the test ends.
func TCPPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return acceptPair(t, l)
}

func acceptPair(t testing.TB, l net.Listener) (net.Conn, net.Conn) {
	t.Helper()
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	a, err := net.Dial(l.Addr().Network(), l.Addr().String())
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

// SlowDrain reads c until it fails, pausing now and then so that the
// writer's socket buffer fills and its writes stop part way, and then
// sends everything it read.
func SlowDrain(c net.Conn) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		var buf bytes.Buffer
		p := make([]byte, 3000)
		for {
			n, err := c.Read(p)
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
	return got
}

// EachPair runs f as a subtest on a fresh Unix pair and a fresh TCP pair.
func EachPair(t *testing.T, f func(t *testing.T, a, b net.Conn)) {
	for _, p := range []struct {
		name string
		make func(testing.TB) (net.Conn, net.Conn)
	}{{"unix", UnixPair}, {"tcp", TCPPair}} {
		t.Run(p.name, func(t *testing.T) {
			a, b := p.make(t)
			f(t, a, b)
		})
	}
}

// SmallSendBuffer shrinks c's send buffer to 4 KiB, so that large
// writes to a slow reader stop part way.
func SmallSendBuffer(t testing.TB, c net.Conn) {
	t.Helper()
	if err := c.(interface{ SetWriteBuffer(int) error }).SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
}

// RandomBytes returns n bytes from rng.
func RandomBytes(rng *rand.Rand, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}
