package nbd_test

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/syncbuf"
	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// sinkDisk reads as zeroes and drops what is written: a backend that
// holds no memory of its own and is served by handler goroutines (it is
// no *nbd.Memory), so every READ reply lives in a payload buffer.
type sinkDisk struct{ size int64 }

func (d sinkDisk) Size() int64 { return d.size }

func (d sinkDisk) ReadAt(_ context.Context, p []byte, _ int64) (int, error) {
	clear(p)
	return len(p), nil
}

func (d sinkDisk) WriteAt(_ context.Context, p []byte, _ int64) (int, error) { return len(p), nil }

// settledHeap waits until the live heap stops changing and returns the
// lowest it reads over the following second. A buffer on its way
// between two of the server's goroutines (read into by one, given back
// by another) is counted while it passes; under -race on a loaded
// machine one such passage once outlasted the first four steady
// readings. What the server holds stays through the whole window.
func settledHeap(t *testing.T) uint64 {
	t.Helper()
	const steady, window = 4, 14 // readings 100 ms apart
	var last, lowest uint64
	stable := 0
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		runtime.GC() // a second cycle empties the buffer pools' victim caches
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		cur := ms.HeapAlloc
		switch {
		case stable >= steady:
			lowest = min(lowest, cur)
			if stable++; stable == window {
				return lowest
			}
		case cur+1<<20 > last && cur < last+1<<20:
			if stable++; stable == steady {
				lowest = cur
			}
		default:
			stable = 0
		}
		last = cur
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("heap did not settle: %d MiB", last>>20)
	return 0
}

// stalledClient connects, negotiates the export and sends requests from
// a goroutine without ever reading a reply; the sends block once the
// server stops reading.
func stalledClient(t *testing.T, srv *nbdtest.Server, export string, reqs [][]byte) {
	t.Helper()
	r := dialRaw(t, srv)
	r.c.SetDeadline(time.Time{})
	r.greet(nbdtest.FlagFixedNewstyle | nbdtest.FlagNoZeroes)
	r.goExport(export)
	go func() {
		for _, b := range reqs {
			if _, err := r.c.Write(b); err != nil {
				return // closed at the end of the test
			}
		}
	}()
}

// TestStalledReadersHoldBoundedMemory: clients that send large READs and
// never read the replies make the server hold at most the queued-reply
// bound per connection, not the whole in-flight budget.
func TestStalledReadersHoldBoundedMemory(t *testing.T) {
	const conns, perConn = 4, 8
	const size = nbd.DefaultMaxPayload
	srv := nbdtest.Start(t, nbd.Config{Exports: []*nbd.Export{{Name: "s", Backend: sinkDisk{1 << 30}}}})
	base := settledHeap(t)
	for range conns {
		var reqs [][]byte
		for i := range perConn {
			reqs = append(reqs, nbdtest.Request(0, nbdtest.CmdRead, uint64(i), uint64(i)*size, size, nil))
		}
		stalledClient(t, srv, "s", reqs)
	}
	held := int64(settledHeap(t)) - int64(base)
	limit := int64(conns)*nbd.DefaultMaxReplyBytes + 16<<20
	t.Logf("%d stalled connections hold %d MiB (limit %d MiB)", conns, held>>20, limit>>20)
	if held > limit {
		t.Fatalf("%d stalled connections hold %d MiB, over %d MiB", conns, held>>20, limit>>20)
	}
}

// TestStalledWritersHoldBoundedMemory: a WRITE payload is not kept
// until a reply nobody reads goes out. A client that stalls the replies
// with a large READ and then sends WRITEs makes the server hold that READ
// and at most the one payload it is reading, not every WRITE the
// in-flight budget admits.
func TestStalledWritersHoldBoundedMemory(t *testing.T) {
	const conns, perConn = 4, 8
	const size = 16 << 20
	srv := nbdtest.Start(t, nbd.Config{Exports: []*nbd.Export{{Name: "s", Backend: sinkDisk{1 << 30}}}})
	base := settledHeap(t)
	payload := make([]byte, size) // shared by every request the clients send
	for range conns {
		reqs := [][]byte{nbdtest.Request(0, nbdtest.CmdRead, 0, 0, nbd.DefaultMaxPayload, nil)}
		for i := range perConn {
			reqs = append(reqs, nbdtest.Request(0, nbdtest.CmdWrite, uint64(i+1), uint64(i)*size, size, nil), payload)
		}
		stalledClient(t, srv, "s", reqs)
	}
	held := int64(settledHeap(t)) - int64(base)
	limit := int64(conns)*(nbd.DefaultMaxReplyBytes+size) + size + 16<<20
	t.Logf("%d stalled writers hold %d MiB (limit %d MiB)", conns, held>>20, limit>>20)
	if held > limit {
		t.Fatalf("%d stalled writers hold %d MiB, over %d MiB", conns, held>>20, limit>>20)
	}
}

// greeted dials and reads the server's greeting.
func greeted(t *testing.T, srv *nbdtest.Server) *rawConn {
	t.Helper()
	r := dialRaw(t, srv)
	if _, err := nbdtest.ReadGreeting(r.br); err != nil {
		t.Fatalf("greeting: %v", err)
	}
	return r
}

func TestConnectionLimit(t *testing.T) {
	var logs syncbuf.Buffer
	m, _ := nbd.NewMemory(1 << 20)
	srv := nbdtest.Start(t, nbd.Config{
		Exports:  []*nbd.Export{{Name: "e", Backend: m}},
		MaxConns: 2,
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
	})
	first := greeted(t, srv)
	second := dialRaw(t, srv)
	second.greet(nbdtest.FlagFixedNewstyle)
	second.goExport("e") // one in transmission, one in the handshake

	over := dialRaw(t, srv)
	over.expectClosed()
	if !strings.Contains(logs.String(), "connection limit reached") || !strings.Contains(logs.String(), "limit=2") {
		t.Fatalf("refusal not logged:\n%s", logs.String())
	}

	// A slot frees when a connection ends.
	first.c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", srv.Socket)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		_, err = nbdtest.ReadGreeting(bufio.NewReader(c))
		c.Close()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot after a connection closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	second.send(nbdtest.Request(0, nbdtest.CmdFlush, 1, 0, 0, nil))
	if errno, _ := second.simpleReply(); errno != 0 {
		t.Fatalf("flush on an admitted connection: errno %d", errno)
	}
}

// TestConnectionLimitDefault: a server configured with nothing bounds
// its connections.
func TestConnectionLimitDefault(t *testing.T) {
	srv, _ := nbdtest.StartMemory(t, "e", 1<<20)
	for range nbd.DefaultMaxConns {
		greeted(t, srv)
	}
	dialRaw(t, srv).expectClosed()
}

func TestHandshakeTimeout(t *testing.T) {
	pki := nbdtest.NewPKI(t)
	m, _ := nbd.NewMemory(1 << 20)
	const timeout = 300 * time.Millisecond
	srv := nbdtest.Start(t, nbd.Config{
		Exports:          []*nbd.Export{{Name: "e", Backend: m}},
		TLSConfig:        pki.ServerConfig(),
		HandshakeTimeout: timeout,
	})
	closedWithin := func(r *rawConn, what string) {
		t.Helper()
		start := time.Now()
		r.expectClosed()
		if d := time.Since(start); d > timeout+3*time.Second {
			t.Fatalf("%s: closed after %v", what, d)
		}
	}

	// Silent after the greeting.
	closedWithin(greeted(t, srv), "no client flags")

	// Options, then silence.
	r := dialRaw(t, srv)
	r.greet(nbdtest.FlagFixedNewstyle)
	r.expectOpt(nbdtest.OptList, nil, nbdtest.RepAck)
	closedWithin(r, "idle between options")

	// TLS started, no ClientHello.
	r = dialRaw(t, srv)
	r.greet(nbdtest.FlagFixedNewstyle)
	r.expectOpt(nbdtest.OptStartTLS, nil, nbdtest.RepAck)
	closedWithin(r, "idle in the TLS handshake")

	// The bound ends with the handshake: an idle connection in the
	// transmission phase stays.
	r = dialRaw(t, srv)
	r.greet(nbdtest.FlagFixedNewstyle)
	r.goExport("e")
	time.Sleep(3 * timeout)
	r.send(nbdtest.Request(0, nbdtest.CmdFlush, 7, 0, 0, nil))
	if errno, cookie := r.simpleReply(); errno != 0 || cookie != 7 {
		t.Fatalf("flush after idling in transmission: errno %d cookie %d", errno, cookie)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		":10809":                  true,
		"127.0.0.1:10809":         true,
		"127.8.9.10:0":            true,
		"[::1]:10809":             true,
		"[::ffff:127.0.0.1]:1":    true,
		"localhost:10809":         true,
		"0.0.0.0:10809":           false,
		"[::]:10809":              false,
		"192.0.2.7:10809":         false,
		"[2001:db8::1]:10809":     false,
		"[::ffff:192.0.2.7]:1":    false,
		"[fe80::1%lo]:10809":      false,
		"10.0.0.1:0":              false,
		"169.254.1.1:10809":       false,
		"[0:0:0:0:0:0:0:1]:10809": true,
	} {
		got, err := nbd.LoopbackOnly(context.Background(), addr)
		if err != nil || got != want {
			t.Errorf("LoopbackOnly(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	if _, err := nbd.LoopbackOnly(context.Background(), "10809"); err == nil {
		t.Error("an address without a port is accepted")
	}
}
