//go:build linux

package nbd

import (
	"io"
	"testing"
	"time"
)

// Sockets are read with raw system calls on Linux only (rawSyscalls);
// elsewhere the net.Conn path has no raw reader to test.

// TestRawReaderEOFAndDeadline: a closed peer reads as io.EOF, and a read
// deadline interrupts a read that waits in the poller.
func TestRawReaderEOFAndDeadline(t *testing.T) {
	a, b := unixPair(t)
	rc := rawSocket(a)
	if rc == nil {
		t.Fatal("no raw socket on a Unix connection")
	}
	r := newRawReader(rc)
	a.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := r.Read(make([]byte, 10)); err == nil || !isTimeout(err) {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	a.SetReadDeadline(time.Time{})
	b.Write([]byte("hello"))
	b.Close()
	p := make([]byte, 10)
	n, err := r.Read(p)
	if err != nil || string(p[:n]) != "hello" {
		t.Fatalf("read %q, %v; want hello", p[:n], err)
	}
	if _, err := r.Read(p); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}
}

// TestRawReaderPolling: a read that finds the socket empty polls it, so
// data sent soon after is read without a wait in the poller; reads that
// polled in vain maxMisses times in a row turn polling off, and a wait
// that ends within maxSpin turns it on again.
func TestRawReaderPolling(t *testing.T) {
	a, b := unixPair(t)
	r := newRawReader(rawSocket(a))
	p := make([]byte, 10)
	for i := range maxMisses {
		if r.spin != maxSpin {
			t.Fatalf("after %d idle reads: polling window %v, want %v", i, r.spin, maxSpin)
		}
		go func() {
			time.Sleep(10 * time.Millisecond)
			b.Write([]byte("x"))
		}()
		if n, err := r.Read(p); n != 1 || err != nil {
			t.Fatalf("read %d, %v", n, err)
		}
		if r.parkedAt.IsZero() {
			t.Fatalf("read %d did not wait in the poller for data sent 10 ms later", i)
		}
	}
	if r.spin != 0 {
		t.Fatalf("after %d reads that polled in vain: polling window %v, want 0", maxMisses, r.spin)
	}
	r.adapt(maxSpin / 2)
	if r.spin != maxSpin || r.misses != 0 {
		t.Fatalf("after a short wait: polling window %v, misses %d; want %v, 0", r.spin, r.misses, maxSpin)
	}
	// data already there: no poll, no wait, and the misses start over
	r.misses = 3
	b.Write([]byte("y"))
	if n, err := r.Read(p); n != 1 || err != nil || !r.parkedAt.IsZero() || r.misses != 0 {
		t.Fatalf("read of buffered data: %d, %v, parked %v, misses %d", n, err, !r.parkedAt.IsZero(), r.misses)
	}
}
