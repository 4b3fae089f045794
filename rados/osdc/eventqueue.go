package osdc

import (
	"context"
	"sync"
)

// eventQueue hands watch events to the watcher in order without ever
// blocking the session that received them.
type eventQueue struct {
	mu     sync.Mutex
	q      []WatchEvent
	wake   chan struct{}
	closed chan struct{}
	once   sync.Once
	out    chan WatchEvent
}

func newEventQueue() *eventQueue {
	return &eventQueue{wake: make(chan struct{}, 1), closed: make(chan struct{}), out: make(chan WatchEvent)}
}

func (q *eventQueue) push(ev WatchEvent) {
	q.mu.Lock()
	q.q = append(q.q, ev)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) close() { q.once.Do(func() { close(q.closed) }) }

// pump delivers queued events until the queue or the objecter closes,
// then closes out.
func (q *eventQueue) pump(ctx context.Context) {
	defer close(q.out)
	for {
		q.mu.Lock()
		var ev WatchEvent
		have := len(q.q) > 0
		if have {
			ev = q.q[0]
			q.q = q.q[1:]
		}
		q.mu.Unlock()
		if !have {
			select {
			case <-q.wake:
				continue
			case <-q.closed:
				return
			case <-ctx.Done():
				return
			}
		}
		select {
		case q.out <- ev:
		case <-q.closed:
			return
		case <-ctx.Done():
			return
		}
	}
}
