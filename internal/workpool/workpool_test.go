package workpool

import (
	"sync"
	"testing"
	"time"
)

// waitLive waits up to d for the pool to keep n goroutines.
func waitLive[T any](t *testing.T, p *Pool[T], n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for p.Live() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the pool keeps %d goroutines after %v, want %d", p.Live(), d, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestServesAndReuses: every request is served; requests that come one
// after another are served by one goroutine; requests that wait in
// serve at once each get their own.
func TestServesAndReuses(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	p := New(time.Hour, func(block bool) {
		if block {
			<-release
		}
		wg.Done()
	})
	defer p.Stop()
	for range 100 {
		wg.Add(1)
		p.Go(false)
		wg.Wait()
	}
	if n := p.Live(); n != 1 {
		t.Fatalf("100 requests one after another kept %d goroutines, want 1", n)
	}
	for range 8 {
		wg.Add(1)
		p.Go(true)
	}
	// the one waiting goroutine took one, the other seven are new
	waitLive(t, p, 8, 10*time.Second)
	close(release)
	wg.Wait()
}

// TestIdleGoroutinesEnd: goroutines that wait a whole idle period end,
// within two periods, while one kept busy stays; once the pool keeps
// none, its timer stops.
func TestIdleGoroutinesEnd(t *testing.T) {
	const idle = 100 * time.Millisecond
	var wg sync.WaitGroup
	release := make(chan struct{})
	p := New(idle, func(block bool) {
		if block {
			<-release
		}
		wg.Done()
	})
	defer p.Stop()
	wg.Add(6)
	for range 6 {
		p.Go(true)
	}
	waitLive(t, p, 6, 10*time.Second)
	close(release)
	wg.Wait()
	// one request every fifth of a period keeps one goroutine busy
	stop := make(chan struct{})
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		tick := time.NewTicker(idle / 5)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				wg.Add(1)
				p.Go(false)
				wg.Wait()
			}
		}
	}()
	// the goroutines the load no longer needs end; the busy one stays
	waitLive(t, p, 1, 10*idle)
	time.Sleep(3 * idle)
	if n := p.Live(); n != 1 {
		t.Fatalf("with one request every fifth of a period: %d goroutines kept, want 1", n)
	}
	close(stop)
	<-busy
	waitLive(t, p, 0, 10*idle)
	p.mu.Lock()
	armed := p.armed
	p.mu.Unlock()
	if armed {
		time.Sleep(2 * idle)
		p.mu.Lock()
		armed = p.armed
		p.mu.Unlock()
		if armed {
			t.Fatal("the period timer still runs with no goroutine kept")
		}
	}
	// and the pool starts goroutines again
	wg.Add(1)
	p.Go(false)
	wg.Wait()
	waitLive(t, p, 1, time.Second)
}

// TestStop: Stop ends the waiting goroutines at once, and one serving a
// request after it.
func TestStop(t *testing.T) {
	var blocked, quick sync.WaitGroup
	release := make(chan struct{})
	p := New(time.Hour, func(block bool) {
		if block {
			<-release
			blocked.Done()
			return
		}
		quick.Done()
	})
	blocked.Add(1)
	p.Go(true)
	quick.Add(1)
	p.Go(false)
	quick.Wait()
	waitLive(t, p, 2, 10*time.Second)
	p.Stop()
	p.Stop()
	waitLive(t, p, 1, 10*time.Second)
	close(release)
	blocked.Wait()
	waitLive(t, p, 0, 10*time.Second)
}
