package ublk

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/nbd/ublk/internal/uring"
)

// A device with batch I/O (FlagBatchIO) is served without a thread
// that every request passes through:
//
//   - The queue's own goroutine keeps its thread (locked) only to issue
//     the commands that must outlive whatever thread issued them: the
//     one PREP_IO_CMDS that hands every tag to the kernel, and the
//     multishot FETCH_IO_CMDS. The kernel runs its dispatch work on
//     that thread (a thread that exits cancels the commands it issued,
//     which would stop the device), and the thread does nothing else.
//   - A reaper goroutine, on no particular thread, waits for the fetch
//     command's completions in Go's poller: each names a provided buffer
//     holding a batch of tags, whose requests it hands to goroutines.
//   - Each request's goroutine adds its result to the queue's pending
//     commits; the first to find none being sent sends the batch, and
//     whatever arrives meanwhile, as COMMIT_IO_CMDS through a second
//     ring. Commits complete inline, so their completions wake no one.
//
// The ring's task work (the kernel's dispatch) is run on the locked
// thread while it sleeps; the reaper and the handlers are ordinary
// goroutines, so a request costs no hand-off between threads.

// User data of the fetch ring's commands (the wake-up read has
// uring.WakeUserData).
const (
	userDataPrep  = 1
	userDataFetch = 2
)

// batchCommits holds a batch-I/O queue's results waiting to be
// committed, and the ring they are committed through.
type batchCommits struct {
	mu      sync.Mutex
	pending []completion
	spare   []completion
	sending bool // a handler is sending commits
	// serving counts the requests fetched whose results are not yet
	// pending
	serving atomic.Int32
	logged  bool // a failed commit was logged

	// ringMu is held while a commit is sent and while the ring is
	// closed, which sets ring to nil
	ringMu sync.Mutex
	ring   *uring.Ring
	buf    []byte // the elements of the command being sent
}

// runBatch is run for a device with batch I/O.
func (q *queue) runBatch(ctx context.Context, ready chan<- error) error {
	runtime.LockOSThread()
	fail := func(err error) error {
		err = fmt.Errorf("ublk queue %d: %w", q.id, err)
		ready <- err
		return err
	}
	ring, err := uring.New(uint32(q.depth + 4))
	if err != nil {
		return fail(err)
	}
	// a buffer per request in flight: a completion takes a buffer and
	// holds at least one tag, which is not fetched again before it is
	// committed, so the kernel never runs out (it would end the fetch
	// with ENOBUFS, which is handled too)
	entries := 1
	for entries < q.depth {
		entries <<= 1
	}
	bufs, err := ring.RegisterBufRing(0, entries, min(q.depth, maxTagsPerFetch)*2)
	if err != nil {
		ring.Close()
		return fail(err)
	}
	defer func() {
		// the ring first: closing it cancels the fetch, which selects
		// from bufs until then
		ring.Close()
		bufs.Close()
	}()
	commitRing, err := uring.New(4)
	if err != nil {
		return fail(err)
	}
	c := &q.commits
	c.ringMu.Lock()
	c.ring = commitRing
	c.buf = make([]byte, q.depth*batchElemSize)
	c.ringMu.Unlock()
	defer func() {
		c.ringMu.Lock()
		c.ring = nil
		c.ringMu.Unlock()
		commitRing.Close()
	}()

	if err := q.prepBatch(ring); err != nil {
		return fail(err)
	}
	if err := ring.ArmWake(); err != nil {
		return fail(err)
	}
	if err := q.submitFetch(ring, bufs); err != nil {
		return fail(err)
	}
	ready <- nil
	// the reaper stops when ctx ends, or when this thread gives up:
	// both wake it through the ring's wake-up read
	reapCtx, stopReaping := context.WithCancel(ctx)
	defer stopReaping()
	stop := context.AfterFunc(reapCtx, ring.Wake)
	defer stop()

	// the reaper asks this thread to issue the fetch again when the
	// kernel ended it (out of buffers), and ends with the queue
	refetch := make(chan struct{}, 1)
	reaped := make(chan error, 1)
	go func() { reaped <- q.reap(ctx, reapCtx, ring, bufs, refetch) }()
	for {
		select {
		case err := <-reaped:
			return err
		case <-refetch:
			if err := q.submitFetch(ring, bufs); err != nil {
				stopReaping()
				<-reaped
				return fmt.Errorf("ublk queue %d: %w", q.id, err)
			}
		}
	}
}

// maxTagsPerFetch is the most tags the kernel puts in one fetch
// completion (MAX_NR_TAG in ublk_drv.c); a buffer holds that many.
const maxTagsPerFetch = 128

// prepBatch hands every tag of the queue to the kernel (PREP_IO_CMDS)
// and waits for the command to complete.
func (q *queue) prepBatch(ring *uring.Ring) error {
	elems := make([]byte, q.depth*batchElemSize)
	for tag := range q.depth {
		putBatchElem(elems[tag*batchElemSize:], uint16(tag), 0)
	}
	var cmd [ioCmdSize]byte
	encodeBatchIO(cmd[:], q.id, uint16(q.depth), batchElemSize)
	if err := ring.URingCmdAddr(q.charFD, ioOp(ioPrepIOCmds, true), cmd[:], userDataPrep, elems); err != nil {
		return err
	}
	if err := ring.Enter(true); err != nil {
		return err
	}
	cqes := ring.Reap(nil)
	runtime.KeepAlive(elems)
	if len(cqes) != 1 || cqes[0].UserData != userDataPrep {
		return fmt.Errorf("prep: unexpected completions %+v", cqes)
	}
	if cqes[0].Res != 0 {
		return fmt.Errorf("prep: %w", unix.Errno(-cqes[0].Res))
	}
	return nil
}

// submitFetch issues the multishot FETCH_IO_CMDS.
func (q *queue) submitFetch(ring *uring.Ring, bufs *uring.BufRing) error {
	var cmd [ioCmdSize]byte
	encodeBatchIO(cmd[:], q.id, uint16(min(q.depth, maxTagsPerFetch)), 2)
	if err := ring.URingCmdMultishot(q.charFD, ioOp(ioFetchIOCmds, true), cmd[:], userDataFetch, bufs); err != nil {
		return err
	}
	return ring.Enter(false)
}

// reap serves the fetch command's completions until the kernel ends the
// queue (nil) or stop ends; the requests are served with ctx.
func (q *queue) reap(ctx, stop context.Context, ring *uring.Ring, bufs *uring.BufRing, refetch chan<- struct{}) error {
	var cqes []uring.CQE
	for {
		if err := ring.Wait(); err != nil {
			return fmt.Errorf("ublk queue %d: %w", q.id, err)
		}
		cqes = ring.Reap(cqes[:0])
		woke := false
		for _, c := range cqes {
			if c.UserData != userDataFetch {
				continue // the wake-up: ctx is looked at below
			}
			if id, ok := c.BufferID(); ok {
				tags, err := bufs.Buf(id, max(int(c.Res), 0))
				if err != nil {
					return fmt.Errorf("ublk queue %d: %w", q.id, err)
				}
				n := 0
				for i := 0; i+1 < len(tags); i += 2 {
					if q.dispatch(ctx, int(binary.LittleEndian.Uint16(tags[i:]))) {
						n++
					}
				}
				bufs.Recycle(id)
				if n > 0 {
					q.stats.requests.Add(uint64(n))
					q.stats.fetches.Add(1)
					woke = true
				}
			}
			if c.Flags&uring.CQEFlagMore != 0 {
				continue
			}
			switch {
			case c.Res == ioResAbort:
				return nil // the device stopped, or its server is gone
			case c.Res >= 0 || c.Res == -int32(unix.ENOBUFS):
				// one fetch at a time: at most one re-issue is pending
				select {
				case refetch <- struct{}{}:
				default:
				}
			default:
				return fmt.Errorf("ublk queue %d: fetch: %w", q.id, unix.Errno(-c.Res))
			}
		}
		if woke {
			q.stats.wakeups.Add(1)
		}
		if err := stop.Err(); err != nil {
			return err
		}
	}
}

// dispatch starts serving the request of tag, and says whether it did.
func (q *queue) dispatch(ctx context.Context, tag int) bool {
	if tag >= q.depth {
		q.log.Warn("ublk fetch returned a tag out of range", "queue", q.id, "tag", tag)
		return false
	}
	d := decodeIODesc(q.desc[tag*ioDescSize : (tag+1)*ioDescSize])
	q.handlers.Add(1)
	q.commits.serving.Add(1)
	q.start(ctx, tag, d)
	return true
}

// commit queues a request's result for COMMIT_IO_CMDS, and sends the
// pending results unless another handler is sending them. Once ctx has
// ended (the queue is abandoned) nothing is sent: a request that failed
// because of that must not reach the application as an error, and the
// kernel issues every uncommitted request again to the next server.
func (q *queue) commit(ctx context.Context, tag int, res int32) {
	c := &q.commits
	c.mu.Lock()
	c.pending = append(c.pending, completion{tag: uint16(tag), res: res})
	others := c.serving.Add(-1) > 0
	if c.sending {
		c.mu.Unlock()
		return
	}
	c.sending = true
	if others {
		// Let the handlers that are runnable add their results first:
		// the replies of several requests often arrive together, and
		// each commit is a call into the kernel that completes its
		// requests and wakes their waiters, so that sending this result
		// alone would leave the others for a commit of their own.
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
	}
	for len(c.pending) > 0 {
		batch := c.pending
		c.pending = c.spare[:0]
		c.mu.Unlock()
		err := q.sendCommits(ctx, batch)
		c.mu.Lock()
		c.spare = batch[:0]
		switch {
		case errors.Is(err, errQueueEnded):
			// the kernel failed or requeued these already
			c.pending = c.pending[:0]
		case err != nil && !c.logged:
			c.logged = true
			q.log.Warn("ublk commit failed", "queue", q.id, "requests", len(batch), "error", err)
		}
	}
	c.sending = false
	c.mu.Unlock()
}

// errQueueEnded means a result came after its queue ended: the kernel
// has failed or requeued the request already.
var errQueueEnded = errors.New("the queue has ended")

// sendCommits commits batch through the commit ring; only the handler
// that set sending calls it.
func (q *queue) sendCommits(ctx context.Context, batch []completion) error {
	c := &q.commits
	c.ringMu.Lock()
	defer c.ringMu.Unlock()
	// a result that failed because ctx ended came after it ended: this
	// check sees that
	if c.ring == nil || ctx.Err() != nil {
		return errQueueEnded
	}
	n := len(batch)
	for i, d := range batch {
		putBatchElem(c.buf[i*batchElemSize:], d.tag, d.res)
	}
	var cmd [ioCmdSize]byte
	encodeBatchIO(cmd[:], q.id, uint16(n), batchElemSize)
	if err := c.ring.URingCmdAddr(q.charFD, ioOp(ioCommitIOCmds, true), cmd[:], 0, c.buf[:n*batchElemSize]); err != nil {
		return err
	}
	// the kernel completes a commit while it is submitted, so Enter
	// finds its completion there and makes no call; waiting for it
	// keeps the elements' buffer until it is read also if it did not
	if err := c.ring.Submit(); err != nil {
		return err
	}
	if err := c.ring.Enter(true); err != nil {
		return err
	}
	q.stats.commits.Add(1)
	for _, e := range c.ring.Reap(nil) {
		if e.UserData != 0 {
			continue
		}
		if e.Res < 0 {
			return fmt.Errorf("commit: %w", unix.Errno(-e.Res))
		}
		if int(e.Res) != n*batchElemSize {
			return fmt.Errorf("commit: the kernel took %d of %d bytes", e.Res, n*batchElemSize)
		}
	}
	return nil
}
