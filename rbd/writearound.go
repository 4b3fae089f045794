package rbd

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// DefaultMaxDirty is librbd's rbd_cache_max_dirty: how many bytes of
// writes its write-around cache acknowledges before the OSDs do.
const DefaultMaxDirty = 24 << 20

// WriteAround configures librbd's write-around cache (rbd_cache = true,
// rbd_cache_policy = writearound, librbd's default policy): a write
// returns as soon as it has been handed to the OSDs, while fewer than
// MaxDirty bytes are unacknowledged (8 MiB for writes of 1 MiB or more,
// which the cache must copy; beyond that, writes return when the OSDs
// acknowledged them, as without the cache), and Flush returns once
// every write acknowledged before it is durable, reporting the first
// write that failed. Reads and discards of a range wait for the writes in flight to
// it, and a write overlapping one in flight waits for it, so the image
// reads and ends as if every write had completed when it returned.
//
// The zero value turns the cache off: every write returns only once the
// OSDs made it durable. That is purerbd's default, and the right setting
// behind an NBD device the node plugin may be restarted under: the
// kernel cannot resend a write the dead process had acknowledged.
type WriteAround struct {
	// MaxDirty bounds the bytes acknowledged ahead of the OSDs
	// (DefaultMaxDirty is librbd's); zero or less turns the cache off.
	// The image holds copies of those writes' data, and keeps up to
	// MaxDirty bytes of such buffers for reuse until it is closed.
	MaxDirty int64
	// WritethroughUntilFlush keeps the cache off until the first Flush,
	// for clients that never flush (librbd's
	// rbd_cache_writethrough_until_flush, on by default in the library
	// and turned off by the rbd CLI).
	WritethroughUntilFlush bool
}

// ErrWriteBehind wraps the failure of a write that the write-around
// cache had already acknowledged; Flush and Close return it.
type ErrWriteBehind struct {
	Off, Len int64
	Err      error
}

func (e *ErrWriteBehind) Error() string {
	return fmt.Sprintf("rbd: write of %d bytes at %d, acknowledged by the write-around cache, failed: %v", e.Len, e.Off, e.Err)
}

func (e *ErrWriteBehind) Unwrap() error { return e.Err }

// byteRange is the range [off, end) of the image.
type byteRange struct{ off, end uint64 }

func (s byteRange) overlaps(o byteRange) bool { return s.off < o.end && o.off < s.end }

// writeAround is the state of an image's write-around cache.
type writeAround struct {
	maxDirty int64

	mu       sync.Mutex
	enabled  bool                 // false until the first Flush with WritethroughUntilFlush
	inflight map[uint64]byteRange // by admission sequence number
	buckets  map[uint64][]flight  // the same writes by 4 MiB bucket of the image they touch
	order    []uint64             // sequence numbers in admission order; completed ones are skipped lazily
	dirty    int64                // bytes in inflight
	seq      uint64               // last sequence number handed out
	err      error                // first failure since the last Flush returned
	waiters  int                  // goroutines waiting on changed
	changed  chan struct{}        // closed (and replaced) when a write completes and someone waits

	// bg is the context the acknowledged writes run on: their callers'
	// contexts may end once they returned. close cancels it, after
	// Close's flush had its chance.
	bg       context.Context
	bgCancel context.CancelFunc

	bufs    bufferPool
	workers workerPool
}

// flight is a write in flight in a bucket.
type flight struct {
	seq uint64
	r   byteRange
}

// bucketShift sizes the buckets in which writes in flight are looked up.
const bucketShift = 22

func newWriteAround(o WriteAround) *writeAround {
	if o.MaxDirty <= 0 {
		return nil
	}
	bg, cancel := context.WithCancel(context.Background())
	return &writeAround{
		bg:       bg,
		bgCancel: cancel,
		maxDirty: o.MaxDirty,
		enabled:  !o.WritethroughUntilFlush,
		inflight: make(map[uint64]byteRange),
		buckets:  make(map[uint64][]flight),
		changed:  make(chan struct{}),
		bufs:     bufferPool{limit: o.MaxDirty},
		workers:  newWorkerPool(int(o.MaxDirty >> minBufShift)),
	}
}

// active tells whether writes are acknowledged ahead of the OSDs now.
func (w *writeAround) active() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.enabled
}

// overlapsLocked tells whether s overlaps a write in flight.
func (w *writeAround) overlapsLocked(s byteRange) bool {
	if len(w.inflight) == 0 || s.end <= s.off {
		return false
	}
	for b := s.off >> bucketShift; b <= (s.end-1)>>bucketShift; b++ {
		for _, f := range w.buckets[b] {
			if f.r.overlaps(s) {
				return true
			}
		}
	}
	return false
}

// oldestLocked returns the sequence number of the oldest write in
// flight, or 0 when there is none.
func (w *writeAround) oldestLocked() uint64 {
	for len(w.order) > 0 {
		if _, ok := w.inflight[w.order[0]]; ok {
			return w.order[0]
		}
		w.order = w.order[1:]
	}
	return 0
}

// waitLocked waits, with w.mu held on entry and on return, until a write
// completes or ctx ends.
func (w *writeAround) waitLocked(ctx context.Context) error {
	ch := w.changed
	w.waiters++
	w.mu.Unlock()
	var err error
	select {
	case <-ch:
	case <-ctx.Done():
		err = ctx.Err()
	}
	w.mu.Lock()
	w.waiters--
	return err
}

// Writes of largeWrite bytes or more that the cache copies (all but
// Image.WriteFrozenAt's) are acknowledged early only while the writes in
// flight, with this one, stay under largeDirty, a third of librbd's
// MaxDirty. librbd acknowledges a write early without copying it (its
// buffers are reference-counted); the cache here must copy a buffer its
// caller may reuse, and once a few MiB are on their way to the OSDs,
// copying another MiB costs more than the wait it saves.
const (
	largeWrite = 1 << 20
	largeDirty = 8 << 20
)

// admit waits until no write in flight overlaps s, then registers s as
// acknowledged ahead of the OSDs if it fits under MaxDirty (a large
// write the cache copies: under largeDirty) or nothing is in flight, and
// returns its sequence number with early true. A write that does not fit
// is not held back, as librbd holds it: it goes to the OSDs at once and
// its caller waits for them (early false), so the cache never has fewer
// writes in flight than no cache would.
func (w *writeAround) admit(ctx context.Context, s byteRange, copies bool) (seq uint64, early bool, err error) {
	n := int64(s.end - s.off)
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.overlapsLocked(s) {
		if err := w.waitLocked(ctx); err != nil {
			return 0, false, fmt.Errorf("rbd: waiting for the write-around cache: %w", err)
		}
	}
	if w.dirty > 0 && (w.dirty+n > w.maxDirty || copies && n >= largeWrite && w.dirty+n > largeDirty) {
		return 0, false, nil
	}
	w.seq++
	w.inflight[w.seq] = s
	for b := s.off >> bucketShift; b <= (s.end-1)>>bucketShift; b++ {
		w.buckets[b] = append(w.buckets[b], flight{w.seq, s})
	}
	w.order = append(w.order, w.seq)
	w.dirty += n
	return w.seq, true, nil
}

// complete retires the write admitted as seq; err is its outcome.
func (w *writeAround) complete(seq uint64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.inflight[seq]
	delete(w.inflight, seq)
	for b := s.off >> bucketShift; b <= (s.end-1)>>bucketShift; b++ {
		fs := w.buckets[b]
		for i := range fs {
			if fs[i].seq == seq {
				fs[i] = fs[len(fs)-1]
				fs = fs[:len(fs)-1]
				break
			}
		}
		if len(fs) == 0 {
			delete(w.buckets, b)
		} else {
			w.buckets[b] = fs
		}
	}
	w.oldestLocked() // drops completed writes from the front of w.order
	w.dirty -= int64(s.end - s.off)
	if err != nil && w.err == nil {
		w.err = &ErrWriteBehind{Off: int64(s.off), Len: int64(s.end - s.off), Err: err}
	}
	if w.waiters > 0 {
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

// settle waits until no acknowledged write overlapping s is in flight:
// reads and discards of s then see every write acknowledged before them.
func (w *writeAround) settle(ctx context.Context, s byteRange) error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.overlapsLocked(s) {
		if err := w.waitLocked(ctx); err != nil {
			return fmt.Errorf("rbd: waiting for writes in flight: %w", err)
		}
	}
	return nil
}

// flush turns the cache on (after the first flush, with
// WritethroughUntilFlush), waits for every write admitted before it and
// returns the first failure since the last flush.
func (w *writeAround) flush(ctx context.Context) error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.enabled = true
	last := w.seq
	for o := w.oldestLocked(); o != 0 && o <= last; o = w.oldestLocked() {
		if err := w.waitLocked(ctx); err != nil {
			return fmt.Errorf("rbd: flushing the write-around cache: %w", err)
		}
	}
	err := w.err
	w.err = nil
	return err
}

// close cancels the writes still in flight (Close calls it after its
// flush), stops the idle workers and drops the kept buffers.
func (w *writeAround) close() {
	if w != nil {
		w.bgCancel()
		w.workers.close()
		w.bufs.drop()
	}
}

// workerPool runs the writes the cache acknowledged on at most max
// goroutines that stay around for the next write: a fresh goroutine per
// write would grow its stack from scratch down the OSD client's call
// chain every time, and thousands of 4 KiB writes acknowledged at once
// would each get one (librbd's objecter likewise keeps at most
// objecter_inflight_ops in flight). Writes beyond that wait in jobs,
// already acknowledged; a caller blocks on a full queue only with writes
// under 4 KiB.
type workerPool struct {
	jobs chan func()
	stop chan struct{}
	once sync.Once

	mu                  sync.Mutex
	alive, idle, queued int
}

const (
	// maxWriteBehindWorkers bounds the writes the cache has at the OSDs:
	// librbd's objecter_inflight_ops. An OSD spends less CPU per write
	// the more it has queued, so the bound is well above the writes
	// librbd keeps in flight.
	maxWriteBehindWorkers = 1024
	// workerIdle is how long a worker waits for another job before it ends.
	workerIdle = 2 * time.Second
)

// newWorkerPool makes a pool whose queue holds queue writes without
// blocking their callers: as many 4 KiB writes as MaxDirty allows.
func newWorkerPool(queue int) workerPool {
	return workerPool{jobs: make(chan func(), max(queue, 1024)), stop: make(chan struct{})}
}

// run runs job on an idle worker, on a new one while there are fewer
// than the maximum, or else once a worker is free.
func (p *workerPool) run(job func()) {
	p.mu.Lock()
	if p.idle == 0 && p.alive < maxWriteBehindWorkers {
		p.alive++
		p.mu.Unlock()
		go p.work(job)
		return
	}
	p.queued++ // a worker does not end while jobs are queued
	p.mu.Unlock()
	p.jobs <- job
}

func (p *workerPool) work(job func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		job()
		p.mu.Lock()
		p.idle++
		p.mu.Unlock()
		idle.Reset(workerIdle)
		select {
		case job = <-p.jobs:
		case <-idle.C:
			job = nil
		case <-p.stop:
			job = nil
		}
		p.mu.Lock()
		p.idle--
		if job == nil && p.queued == 0 {
			p.alive--
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		if job == nil {
			job = <-p.jobs // one is queued, or about to be
		}
		p.mu.Lock()
		p.queued--
		p.mu.Unlock()
	}
}

func (p *workerPool) close() { p.once.Do(func() { close(p.stop) }) }
