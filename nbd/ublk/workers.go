package ublk

import (
	"context"
	"time"
)

// A queue serves its requests on goroutines it keeps: a request goes to
// a worker waiting for one, or starts a new worker when none waits, and
// a worker that waited workerIdle for a request ends. A worker's stack
// has grown to what serving a request takes (the backend's calls run
// deep), so a goroutine per request would grow a fresh stack, copying
// it, for every request; the workers keep theirs while the queue is
// busy and give them back when it goes idle.

// workerIdle is how long a worker waits for a request before it ends.
const workerIdle = 2 * time.Second

// request is a fetched request handed to a worker.
type request struct {
	tag int
	d   ioDesc
}

// workers hands a queue's requests to its worker goroutines.
type workers struct {
	work chan request  // unbuffered: a send succeeds only to a waiting worker
	quit chan struct{} // closed when the queue has ended
}

func newWorkers() workers {
	return workers{work: make(chan request), quit: make(chan struct{})}
}

// start serves the request of tag with d, on a waiting worker or a new
// one; the caller has added it to q.handlers.
func (q *queue) start(ctx context.Context, tag int, d ioDesc) {
	r := request{tag: tag, d: d}
	select {
	case q.workers.work <- r:
	default:
		go q.worker(ctx, r)
	}
}

// worker serves r, then the requests handed to it, until it has waited
// workerIdle for one or the queue has ended.
func (q *queue) worker(ctx context.Context, r request) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		q.handle(ctx, r.tag, r.d)
		idle.Reset(workerIdle)
		select {
		case r = <-q.workers.work:
		case <-idle.C:
			return
		case <-q.workers.quit:
			return
		}
	}
}

// stopWorkers ends the waiting workers once the queue will hand out no
// more requests; those serving one end after it.
func (q *queue) stopWorkers() {
	close(q.workers.quit)
}
