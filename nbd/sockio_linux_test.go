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
