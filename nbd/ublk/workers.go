package ublk

import (
	"context"
	"time"

	"github.com/purerbd/purerbd/internal/workpool"
)

// A queue serves its requests on goroutines a workpool keeps: a worker's
// stack has grown to what serving a request takes (the backend's calls
// run deep), so a goroutine per request would grow a fresh stack, copying
// it, for every request; the workers keep theirs while the queue is busy
// and give them back when it goes idle.

// workerIdle is how long a worker waits for a request before it ends.
const workerIdle = 2 * time.Second

// request is a fetched request handed to a worker.
type request struct {
	ctx context.Context
	tag int
	d   ioDesc
}

func (q *queue) newWorkers() *workpool.Pool[request] {
	return workpool.New(workerIdle, func(r request) { q.handle(r.ctx, r.tag, r.d) })
}

// start serves the request of tag with d on a worker; the caller has
// added it to q.handlers.
func (q *queue) start(ctx context.Context, tag int, d ioDesc) {
	q.workers.Go(request{ctx: ctx, tag: tag, d: d})
}

// stopWorkers ends the waiting workers once the queue will hand out no
// more requests; those serving one end after it.
func (q *queue) stopWorkers() {
	q.workers.Stop()
}
