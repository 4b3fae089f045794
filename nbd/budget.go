package nbd

import (
	"context"
	"sync"
)

// budget bounds the requests of one connection that are being served:
// their number, the bytes of payload buffers they hold, and among those
// the bytes of replies owed to the client. The reader acquires a share
// before it reads a payload, the handler releases it after the reply is
// written, so a client can never make the server hold more.
//
// The reply bound is what stops a client that sends READs and does not
// read the replies: each READ's data is held from the moment the request
// is read until the client has taken the reply, and once maxReply bytes
// are owed the reader stops reading requests until the client reads.
// WRITE payloads are released as soon as the backend has them (the reply
// is a header), so they are bounded by maxBytes alone.
type budget struct {
	mu       sync.Mutex
	count    int
	maxCount int
	bytes    int64
	maxBytes int64
	reply    int64 // bytes of shares with reply set
	maxReply int64
	// wake is closed by the next release when acquire is waiting on it,
	// and nil otherwise, so a release with nobody waiting allocates
	// nothing.
	wake chan struct{}
	idle func() // called after a release that leaves nothing in flight
}

// share is what one request holds of the budget.
type share struct {
	bytes int64
	// reply: the bytes are reply data, held until the client is sent it.
	reply bool
}

func newBudget(maxCount int, maxBytes, maxReply int64) *budget {
	return &budget{maxCount: maxCount, maxBytes: maxBytes, maxReply: maxReply}
}

// clamp is what s holds of the budget: a request larger than a bound
// takes all of it, so that it can always run alone.
func (b *budget) clamp(s share) (n, reply int64) {
	n = min(s.bytes, b.maxBytes)
	if s.reply {
		reply = min(s.bytes, b.maxReply)
	}
	return n, reply
}

// acquire waits until one more request holding s fits.
func (b *budget) acquire(ctx context.Context, s share) error {
	n, reply := b.clamp(s)
	for {
		b.mu.Lock()
		if b.count < b.maxCount && b.bytes+n <= b.maxBytes && b.reply+reply <= b.maxReply {
			b.count++
			b.bytes += n
			b.reply += reply
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

// release returns what acquire(s) took.
func (b *budget) release(s share) {
	n, reply := b.clamp(s)
	b.mu.Lock()
	b.count--
	b.bytes -= n
	b.reply -= reply
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
