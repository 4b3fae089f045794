//go:build linux

package rawsock

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/rawsock/rawsocktest"
)

// Sockets are read with raw system calls on Linux only (rawSyscalls);
// elsewhere Of returns nil and there is no Reader to test.

// TestReaderEOFAndDeadline: a closed peer reads as io.EOF, and a read
// deadline interrupts a read that waits in the poller, on Unix and TCP
// connections, polling or not.
func TestReaderEOFAndDeadline(t *testing.T) {
	for _, poll := range []bool{false, true} {
		t.Run(fmt.Sprintf("poll=%v", poll), func(t *testing.T) {
			rawsocktest.EachPair(t, func(t *testing.T, a, b net.Conn) {
				testReaderEOFAndDeadline(t, a, b, poll)
			})
		})
	}
}

func testReaderEOFAndDeadline(t *testing.T, a, b net.Conn, poll bool) {
	rc := Of(a)
	if rc == nil {
		t.Fatal("no raw socket on a Unix connection")
	}
	r := NewReader(rc, poll)
	a.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := r.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
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

// TestReaderPolling: a read that finds the socket empty polls it, so
// data sent soon after is read without a wait in the poller; reads that
// polled in vain MaxMisses times in a row turn polling off, and a wait
// that ends within MaxSpin turns it on again.
func TestReaderPolling(t *testing.T) {
	a, b := rawsocktest.UnixPair(t)
	r := NewReader(Of(a), true)
	p := make([]byte, 10)
	for i := range MaxMisses {
		if r.spin != MaxSpin {
			t.Fatalf("after %d idle reads: polling window %v, want %v", i, r.spin, MaxSpin)
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
		t.Fatalf("after %d reads that polled in vain: polling window %v, want 0", MaxMisses, r.spin)
	}
	r.adapt(MaxSpin / 2)
	if r.spin != MaxSpin || r.misses != 0 {
		t.Fatalf("after a short wait: polling window %v, misses %d; want %v, 0", r.spin, r.misses, MaxSpin)
	}
	// data already there: no poll, no wait, and the misses start over
	r.misses = 3
	b.Write([]byte("y"))
	if n, err := r.Read(p); n != 1 || err != nil || !r.parkedAt.IsZero() || r.misses != 0 {
		t.Fatalf("read of buffered data: %d, %v, parked %v, misses %d", n, err, !r.parkedAt.IsZero(), r.misses)
	}
}

// TestReaderNoPolling: a Reader made without polling never polls: a read
// of an empty socket waits in the poller at once, and stays that way.
func TestReaderNoPolling(t *testing.T) {
	a, b := rawsocktest.UnixPair(t)
	r := NewReader(Of(a), false)
	p := make([]byte, 10)
	for range MaxMisses + 2 {
		go func() {
			time.Sleep(time.Millisecond)
			b.Write([]byte("x"))
		}()
		if n, err := r.Read(p); n != 1 || err != nil {
			t.Fatalf("read %d, %v", n, err)
		}
		if r.spin != 0 || r.misses != 0 || !r.parkedAt.IsZero() {
			t.Fatalf("reader without polling: window %v, misses %d, parked %v", r.spin, r.misses, r.parkedAt)
		}
	}
}

// TestReaderSetPoll: polling turned on later polls as NewReader's does,
// and turned off again waits in the poller at once, whatever the misses
// counted before.
func TestReaderSetPoll(t *testing.T) {
	a, b := rawsocktest.UnixPair(t)
	r := NewReader(Of(a), false)
	p := make([]byte, 10)
	lateRead := func() {
		t.Helper()
		go func() {
			time.Sleep(5 * time.Millisecond)
			b.Write([]byte("x"))
		}()
		if n, err := r.Read(p); n != 1 || err != nil {
			t.Fatalf("read %d, %v", n, err)
		}
	}
	for _, poll := range []bool{true, false, true} {
		r.SetPoll(poll)
		lateRead()
		if polled := !r.parkedAt.IsZero(); polled != poll {
			t.Fatalf("SetPoll(%v): the read polled before it waited: %v", poll, polled)
		}
		if want := map[bool]int{true: 1, false: 0}[poll]; r.misses != want {
			t.Fatalf("SetPoll(%v): %d reads polled in vain, want %d", poll, r.misses, want)
		}
	}
}
