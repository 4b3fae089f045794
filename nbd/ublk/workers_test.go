package ublk

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd/ublk/internal/uring"
)

// gatedBackend's flushes wait for gate; it counts them.
type gatedBackend struct {
	gate    chan struct{}
	mu      sync.Mutex
	flushes int
}

func (b *gatedBackend) ReadAt(context.Context, []byte, int64) (int, error)  { return 0, nil }
func (b *gatedBackend) WriteAt(context.Context, []byte, int64) (int, error) { return 0, nil }
func (b *gatedBackend) Size() int64                                         { return 1 << 20 }
func (b *gatedBackend) Flush(ctx context.Context) error {
	<-b.gate
	b.mu.Lock()
	b.flushes++
	b.mu.Unlock()
	return nil
}

// settledGoroutines waits until the goroutine count stops changing and
// returns it.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 100 {
		time.Sleep(10 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

// TestWorkersReused serves two rounds of requests that are in flight
// together: the second round is served by the first round's workers,
// and every worker ends with the queue.
func TestWorkersReused(t *testing.T) {
	const depth = 16
	b := &gatedBackend{gate: make(chan struct{})}
	q := &queue{depth: depth, maxIO: 4096, backend: b, log: slog.New(slog.DiscardHandler), workers: newWorkers()}
	base := settledGoroutines()
	round := func() int {
		for tag := range depth {
			q.begin()
			q.start(t.Context(), tag, ioDesc{op: opFlush})
		}
		busy := settledGoroutines()
		for range depth {
			b.gate <- struct{}{}
		}
		q.handlers.Wait()
		return busy
	}
	first := round()
	if first-base != depth {
		t.Fatalf("%d goroutines serving %d requests in flight, want one each", first-base, depth)
	}
	if settled := settledGoroutines(); settled != first {
		t.Fatalf("%d goroutines once the requests were served, want the %d workers kept", settled-base, depth)
	}
	if second := round(); second != first {
		t.Fatalf("the second round started %d goroutines beyond the kept workers", second-first)
	}
	q.mu.Lock()
	results := len(q.done)
	q.mu.Unlock()
	if results != 2*depth || b.flushes != 2*depth {
		t.Fatalf("%d results and %d flushes for %d requests", results, b.flushes, 2*depth)
	}
	q.stopWorkers()
	if n := settledGoroutines(); n != base {
		t.Fatalf("%d goroutines left after the queue ended", n-base)
	}
}

// TestLoneRequest: only a reap holding one fetch completion of one tag
// is served on the reaper's goroutine.
func TestLoneRequest(t *testing.T) {
	fetch := func(tags int, buf uint16) uring.CQE {
		return uring.CQE{UserData: userDataFetch, Res: int32(2 * tags), Flags: uring.CQEFlagBuffer | uint32(buf)<<16 | uring.CQEFlagMore}
	}
	wake := uring.CQE{UserData: uring.WakeUserData, Res: 8}
	for _, c := range []struct {
		name string
		cqes []uring.CQE
		want bool
	}{
		{"one tag", []uring.CQE{fetch(1, 0)}, true},
		{"one tag and the wake-up", []uring.CQE{wake, fetch(1, 3)}, true},
		{"two tags in one completion", []uring.CQE{fetch(2, 0)}, false},
		{"two completions of one tag", []uring.CQE{fetch(1, 0), fetch(1, 1)}, false},
		{"no tag", []uring.CQE{wake}, false},
		{"the fetch ended without a buffer", []uring.CQE{{UserData: userDataFetch, Res: -105}}, false},
	} {
		if got := loneRequest(c.cqes); got != c.want {
			t.Errorf("%s: loneRequest = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestInflightCounts: a request counts as in flight from begin until it
// is served, whether a worker serves it or the reaper's goroutine does.
func TestInflightCounts(t *testing.T) {
	const depth = 4
	b := &gatedBackend{gate: make(chan struct{}, 1)}
	desc := make([]byte, depth*ioDescSize)
	for tag := range depth {
		desc[tag*ioDescSize] = opFlush
	}
	q := &queue{depth: depth, maxIO: 4096, desc: desc, backend: b, log: slog.New(slog.DiscardHandler), workers: newWorkers()}
	defer q.stopWorkers()

	q.dispatch(t.Context(), 0)
	if n := q.inflight.Load(); n != 1 {
		t.Fatalf("a worker's request waiting on the backend: %d in flight, want 1", n)
	}
	b.gate <- struct{}{}
	q.handlers.Wait()
	if n := q.inflight.Load(); n != 0 {
		t.Fatalf("after the worker served it: %d in flight, want 0", n)
	}

	b.gate <- struct{}{}
	q.serveHere(t.Context(), 1)
	if n := q.inflight.Load(); n != 0 {
		t.Fatalf("after serveHere: %d in flight, want 0", n)
	}
	q.dispatch(t.Context(), depth) // out of range: logged, not counted
	if n := q.inflight.Load(); n != 0 || b.flushes != 2 || len(q.done) != 2 {
		t.Fatalf("%d in flight, %d flushes, %d results; want 0, 2, 2", n, b.flushes, len(q.done))
	}
}
