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

// settled waits up to 10 s until every goroutine the pool keeps waits
// for a request: a goroutine whose serve has returned is not yet back
// among the waiting ones, and a request handed out before it is starts
// another.
func settled[T any](p *Pool[T]) bool {
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		done := len(p.waiting) == p.live
		p.mu.Unlock()
		if done {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Microsecond)
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
		if !settled(p) {
			t.Fatal("the pool's goroutines are not all waiting after 10s")
		}
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
				if !settled(p) {
					t.Error("the pool's goroutines are not all waiting after 10s")
					return
				}
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

// TestStopServesHandedOut: a request handed to a waiting goroutine just
// before Stop is served, not dropped with the goroutine.
func TestStopServesHandedOut(t *testing.T) {
	for round := range 200 {
		var served sync.WaitGroup
		var mu sync.Mutex
		count := 0
		p := New(time.Hour, func(int) {
			mu.Lock()
			count++
			mu.Unlock()
			served.Done()
		})
		const n = 4
		served.Add(n)
		for i := range n {
			p.Go(i)
		}
		served.Wait()
		if !settled(p) {
			t.Fatal("the pool's goroutines are not all waiting after 10s")
		}
		served.Add(n)
		for i := range n {
			p.Go(i) // each to a waiting goroutine's mailbox
		}
		p.Stop()
		done := make(chan struct{})
		go func() { served.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("round %d: %d of %d requests served; the rest were dropped at Stop", round, count, 2*n)
		}
	}
}
