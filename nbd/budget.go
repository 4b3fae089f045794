package nbd

import (
	"context"
	"sync"
)

// budget bounds the requests of one connection that are being served:
// their number and the bytes of payload buffers they hold. The reader
// acquires before it reads a payload, the handler releases after the reply
// is written, so a client can never make the server hold more.
type budget struct {
	mu       sync.Mutex
	count    int
	maxCount int
	bytes    int64
	maxBytes int64
	// wake is closed by the next release when acquire is waiting on it,
	// and nil otherwise, so a release with nobody waiting allocates
	// nothing.
	wake chan struct{}
	idle func() // called after a release that leaves nothing in flight
}

func newBudget(maxCount int, maxBytes int64) *budget {
	return &budget{maxCount: maxCount, maxBytes: maxBytes}
}

// acquire waits until one more request holding n bytes fits.
func (b *budget) acquire(ctx context.Context, n int64) error {
	n = min(n, b.maxBytes)
	for {
		b.mu.Lock()
		if b.count < b.maxCount && b.bytes+n <= b.maxBytes {
			b.count++
			b.bytes += n
			b.mu.Unlock()
			return nil
		}
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		w := b.wake
		b.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release returns what acquire(n) took.
func (b *budget) release(n int64) {
	n = min(n, b.maxBytes)
	b.mu.Lock()
	b.count--
	b.bytes -= n
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
	idle, fn := b.count == 0, b.idle
	b.mu.Unlock()
	if idle && fn != nil {
		fn()
	}
}

// inFlight is the number of requests holding a share.
func (b *budget) inFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.count
}

// setIdle installs fn, called whenever the count drops to zero, and
// reports whether the count is zero right now.
func (b *budget) setIdle(fn func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.idle = fn
	return b.count == 0
}
