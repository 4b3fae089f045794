package rbd

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// reserveAllocTimeout bounds one background allocation of a reserved
// snapshot id.
const reserveAllocTimeout = time.Minute

// SnapIDReserve keeps one self-managed snapshot id allocated ahead of
// use in every pool a long-running client takes snapshots in (the CSI
// controller), so that CreateSnapshot does not wait for the monitor.
// Allocating an id is a pool operation that the monitor answers only
// after a Paxos commit: paxos_min_wait after a quiet spell, and up to
// paxos_propose_interval (a second by default) after the previous
// commit. With a reserve, a snapshot takes the id allocated after the
// previous one and starts allocating the next in the background.
//
// An id allocated before another snapshot of the same image is stale
// for that image: cls_rbd refuses it (ESTALE), as it refuses an id that
// lost a race with a concurrent snapshot, and CreateSnapshot releases it
// and allocates a fresh one. An id still reserved when the process dies
// is never released; no object carries it, so it keeps no data (librbd
// leaves one the same way when it dies between allocating an id and
// adding the snapshot).
//
// Pass it in OpenOptions.SnapIDs; Close releases the ids still held. It
// is safe for concurrent use.
type SnapIDReserve struct {
	ctx    context.Context // of the background allocations; canceled by Close
	cancel context.CancelFunc
	log    *slog.Logger
	wg     sync.WaitGroup

	mu     sync.Mutex
	pools  map[int64]*reservedSnapID
	closed bool
}

// reservedSnapID is one pool's id, allocated or being allocated.
type reservedSnapID struct {
	done chan struct{} // closed when the allocation has ended
	id   uint64
	err  error
	objs objects // the pool's objects, to release the id
}

// NewSnapIDReserve returns an empty reserve; log (nil: none) hears of
// failed background allocations and releases.
func NewSnapIDReserve(log *slog.Logger) *SnapIDReserve {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &SnapIDReserve{ctx: ctx, cancel: cancel, log: log, pools: map[int64]*reservedSnapID{}}
}

// take returns a snapshot id in o's pool: the reserved one when its
// allocation has completed (reserved true: it may be stale for the
// image), else one allocated now. Either way the allocation of the next
// is under way when it returns, unless one already was.
func (r *SnapIDReserve) take(ctx context.Context, o objects) (id uint64, reserved bool, err error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		id, err := o.allocSnap(ctx)
		return id, false, err
	}
	pool := o.poolID()
	cur := r.pools[pool]
	var got *reservedSnapID
	pending := false
	if cur != nil {
		select {
		case <-cur.done:
			if cur.err == nil {
				got = cur
			}
		default:
			pending = true
		}
	}
	// without a reserved id to hand out, the next is allocated only once
	// this take's own allocation has ended: allocated beside it, it could
	// come out older than the id this snapshot takes, and would then be
	// stale for the image at its next snapshot
	var after chan struct{}
	if got == nil {
		after = make(chan struct{})
	}
	if !pending {
		r.pools[pool] = r.allocate(o, after)
	}
	r.mu.Unlock()
	if got != nil {
		return got.id, true, nil
	}
	defer close(after)
	id, err = o.allocSnap(ctx)
	return id, false, err
}

// allocate starts allocating an id in o's pool, once after (when not
// nil) is closed; r.mu is held.
func (r *SnapIDReserve) allocate(o objects, after <-chan struct{}) *reservedSnapID {
	res := &reservedSnapID{done: make(chan struct{}), objs: o}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(res.done)
		if after != nil {
			select {
			case <-after:
			case <-r.ctx.Done():
				res.err = r.ctx.Err()
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.ctx, reserveAllocTimeout)
		defer cancel()
		res.id, res.err = o.allocSnap(ctx)
		if res.err != nil && !errors.Is(res.err, context.Canceled) {
			r.log.Warn("allocating a snapshot id ahead of use", "pool", o.poolID(), "error", res.err.Error())
		}
	}()
	return res
}

// Close waits for the allocations under way and releases every id still
// reserved. When ctx ends first, the allocations still under way are
// abandoned (an id the monitor allocates for one stays unused). Later
// takes allocate as without a reserve.
func (r *SnapIDReserve) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	pools := r.pools
	r.pools = nil
	r.mu.Unlock()
	waited := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-ctx.Done():
		r.cancel()
		<-waited
	}
	r.cancel()
	var errs []error
	for _, res := range pools {
		if res.err == nil {
			errs = append(errs, res.objs.releaseSnap(ctx, res.id))
		}
	}
	return errors.Join(errs...)
}
