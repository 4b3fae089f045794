package ublk

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"
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
	q := &queue{depth: depth, maxIO: 4096, backend: b, log: slog.New(slog.DiscardHandler)}
	q.workers = q.newWorkers()
	base := settledGoroutines()
	round := func() int {
		for tag := range depth {
			q.handlers.Add(1)
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
