// Package workpool keeps the goroutines that serve a stream of requests:
// a request goes to a goroutine waiting for one, or starts a new one when
// none waits, and a goroutine that waited a whole idle period for a
// request ends. It serves the NBD server's handlers and the ublk queues'
// workers.
//
// The goroutines are kept because a request's call chain (the backend's,
// down to the messenger) grows a goroutine's stack: a goroutine per
// request would grow a fresh stack, copying it, every time. They end when
// the load falls, so an idle device holds no stacks.
//
// Idleness is counted in periods of one pool-wide timer rather than by a
// timer per goroutine, which would be reset after every request: the
// timer runs only while the pool keeps goroutines, and a goroutine ends
// once a period passes in which it served nothing (so after between one
// and two idle periods of waiting).
package workpool

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Pool hands requests of type T to its goroutines, which call serve.
type Pool[T any] struct {
	serve func(T)
	idle  time.Duration
	quit  chan struct{} // closed by Stop
	cur   atomic.Pointer[period]

	mu sync.Mutex
	// waiting are the goroutines waiting for a request, the one that
	// began waiting last at the end: a request goes to it, so that when
	// the load falls the goroutines it no longer needs are those that
	// wait longest, and end.
	waiting []*worker[T]
	live    int         // goroutines kept
	timer   *time.Timer // ends the current period; armed while live > 0
	armed   bool
	stopped bool
}

// worker is a goroutine's mailbox: Go sends it one request after it took
// the worker from waiting, so the send never blocks, and a request handed
// out before Stop is served.
type worker[T any] struct{ next chan T }

// pending returns the request in w's mailbox, if there is one.
func (w *worker[T]) pending() (T, bool) {
	select {
	case r := <-w.next:
		return r, true
	default:
		var zero T
		return zero, false
	}
}

// period is one of the pool's idle periods; end is closed when it ends,
// after the next one has become current.
type period struct{ end chan struct{} }

// New returns a pool whose goroutines call serve for each request and end
// after waiting for one between idle and twice idle.
func New[T any](idle time.Duration, serve func(T)) *Pool[T] {
	p := &Pool[T]{serve: serve, idle: idle, quit: make(chan struct{})}
	p.cur.Store(&period{end: make(chan struct{})})
	p.timer = time.AfterFunc(idle, p.endPeriod)
	p.timer.Stop()
	return p
}

// Go serves r on a waiting goroutine, or on a new one when none waits.
// It must not be called after Stop.
func (p *Pool[T]) Go(r T) {
	p.mu.Lock()
	if n := len(p.waiting); n > 0 {
		w := p.waiting[n-1]
		p.waiting[n-1] = nil
		p.waiting = p.waiting[:n-1]
		// under mu, so that Stop, and a worker that finds itself gone
		// from waiting, come after the request is in its mailbox
		w.next <- r
		p.mu.Unlock()
		return
	}
	p.live++
	if !p.armed && !p.stopped {
		p.armed = true
		p.timer.Reset(p.idle)
	}
	p.mu.Unlock()
	go p.run(r)
}

// Stop ends the waiting goroutines; those serving a request end after it.
// The caller hands out no more requests.
func (p *Pool[T]) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	p.timer.Stop()
	p.armed = false
	clear(p.waiting)
	p.waiting = nil
	close(p.quit)
}

// Live returns how many goroutines the pool keeps.
func (p *Pool[T]) Live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}

// run serves r, then the requests handed to it, until it waited a whole
// period for one or the pool stopped.
func (p *Pool[T]) run(r T) {
	defer p.exit()
	w := &worker[T]{next: make(chan T, 1)}
	for {
		p.serve(r)
		served := p.cur.Load() // the period it last served in
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return
		}
		p.waiting = append(p.waiting, w)
		p.mu.Unlock()
		var ok bool
		if r, ok = p.wait(w, served); !ok {
			return
		}
	}
}

// wait waits for w's next request; false once a whole period after
// served has passed without one, or when the pool stops.
func (p *Pool[T]) wait(w *worker[T], served *period) (T, bool) {
	var zero T
	cur := served
	for {
		select {
		case r := <-w.next:
			return r, true
		case <-p.quit:
			// Stop came after any request Go handed to w
			return w.pending()
		case <-cur.end:
			if cur == served {
				cur = p.cur.Load()
				continue
			}
			p.mu.Lock()
			i := slices.Index(p.waiting, w)
			if i >= 0 {
				p.waiting = slices.Delete(p.waiting, i, i+1)
			}
			p.mu.Unlock()
			if i >= 0 {
				return zero, false
			}
			// Go took w from waiting, and its request is in the mailbox;
			// or Stop emptied waiting
			return w.pending()
		}
	}
}

func (p *Pool[T]) exit() {
	p.mu.Lock()
	p.live--
	p.mu.Unlock()
}

// endPeriod starts the next period, and keeps the timer running while the
// pool keeps goroutines.
func (p *Pool[T]) endPeriod() {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.cur.Load()
	p.cur.Store(&period{end: make(chan struct{})})
	close(old.end)
	if p.live > 0 && !p.stopped {
		p.timer.Reset(p.idle)
	} else {
		p.armed = false
	}
}
