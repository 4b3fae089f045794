package ublk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/internal/bufpool"
	"github.com/purerbd/purerbd/internal/workpool"
	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/ublk/internal/uring"
)

// maxCmdBufSize is the stride of the queues' descriptor arrays in the
// character device's mmap space: room for the deepest queue, in pages.
const maxCmdBufSize = (maxQueueDepth*ioDescSize + 4095) &^ 4095

// queue serves one hardware queue of a device: its thread owns the
// ring through which requests are fetched and committed.
type queue struct {
	id      uint16
	depth   int
	maxIO   int
	charFD  int
	encoded bool
	backend nbd.Backend
	obs     nbd.Observer // nil: none
	log     *slog.Logger

	desc []byte // the kernel's descriptors, read-only
	// bufs holds depth buffers of maxIO bytes, one per tag, into and out
	// of which the kernel copies requests' data; nil with userCopy,
	// where a request's handler copies its data through the character
	// device with a buffer from pool (Config.Buffers, or own), so that
	// an idle queue holds none.
	bufs     []byte
	userCopy bool
	pool     nbd.BufferPool
	own      bufpool.Pool

	handlers sync.WaitGroup          // requests being served
	workers  *workpool.Pool[request] // the goroutines serving them

	// batch: the device has UBLK_F_BATCH_IO (always with userCopy), and
	// run serves it as batch.go says; commits holds that mode's state.
	batch   bool
	commits batchCommits

	stats queueStats

	mu   sync.Mutex
	done []completion
	ring *uring.Ring // set by run before ready closes
}

type completion struct {
	tag uint16
	res int32
}

func newQueue(id uint16, info DevInfo, charFD int, encoded bool, b nbd.Backend, obs nbd.Observer, pool nbd.BufferPool, log *slog.Logger) (*queue, error) {
	q := &queue{id: id, depth: int(info.QueueDepth), maxIO: int(info.MaxIOBufBytes), charFD: charFD, encoded: encoded, backend: b, obs: obs, log: log,
		userCopy: info.Flags&FlagUserCopy != 0, batch: info.Flags&FlagBatchIO != 0, pool: pool}
	q.workers = q.newWorkers()
	if q.pool == nil {
		q.pool = &q.own
	}
	if q.batch && !q.userCopy {
		return nil, fmt.Errorf("ublk queue %d: batch I/O without user copy (flags %#x) is not served", id, info.Flags)
	}
	descLen := (q.depth*ioDescSize + 4095) &^ 4095
	var err error
	q.desc, err = unix.Mmap(charFD, int64(id)*maxCmdBufSize, descLen, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("ublk queue %d: mmap descriptors: %w", id, err)
	}
	if q.userCopy {
		return q, nil
	}
	q.bufs, err = unix.Mmap(-1, 0, q.depth*q.maxIO, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		_ = unix.Munmap(q.desc)
		return nil, fmt.Errorf("ublk queue %d: mmap buffers: %w", id, err)
	}
	return q, nil
}

// release unmaps the queue's memory once no request is being served
// any more (after run returned).
func (q *queue) release() {
	q.handlers.Wait()
	_ = unix.Munmap(q.desc)
	if q.bufs != nil {
		_ = unix.Munmap(q.bufs)
	}
}

// bufAddr is the address a tag's fetch gives the kernel: its buffer, or
// 0 with userCopy.
func (q *queue) bufAddr(tag int) uint64 {
	if q.userCopy {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&q.bufs[tag*q.maxIO])))
}

// userCopyPos is where a request's data is in the character device with
// user copy (UBLKSRV_IO_BUF_OFFSET, the queue from bit 41, the tag from
// bit 25).
func userCopyPos(qid uint16, tag int) int64 {
	return int64(ioBufOffset + uint64(qid)<<41 + uint64(tag)<<25)
}

// copyData moves a user-copy request's n bytes between buf and the
// kernel's request: from it for a write, to it for a read.
//
// The copies are raw pread(2) and pwrite(2) on the character device,
// without the runtime's syscall bookkeeping: a user copy moves data
// between the request's pages and buf and never blocks, and entering a
// system call the usual way wakes the runtime's monitor thread when it
// sleeps, a thread's wake-up per request (as the sockets' raw system
// calls in internal/rawsock spare).
func (q *queue) copyData(tag int, buf []byte, write bool) error {
	trap := uintptr(unix.SYS_PWRITE64)
	if write {
		trap = unix.SYS_PREAD64
	}
	pos := userCopyPos(q.id, tag)
	for done := 0; done < len(buf); {
		p := buf[done:]
		n, _, errno := unix.RawSyscall6(trap, uintptr(q.charFD), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)), uintptr(pos+int64(done)), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return fmt.Errorf("ublk queue %d tag %d: copying request data: %w", q.id, tag, errno)
		}
		if n == 0 {
			return fmt.Errorf("ublk queue %d tag %d: copying request data: %w", q.id, tag, io.ErrUnexpectedEOF)
		}
		done += int(n)
	}
	return nil
}

// run serves the queue until every tag has been aborted by the kernel
// (the device stopped) or ctx ends (the queue is abandoned: closing its
// ring makes the kernel hold the device's I/O for a recovery). ready
// gets nil once every FETCH_REQ is submitted, or the error that
// prevented it.
func (q *queue) run(ctx context.Context, ready chan<- error) error {
	defer q.stopWorkers()
	if q.batch {
		return q.runBatch(ctx, ready)
	}
	// ublk takes a queue's commands only from the thread that fetched
	// them: this goroutine keeps its thread to the end, which then
	// exits with it.
	runtime.LockOSThread()
	ring, err := uring.New(uint32(q.depth + 2))
	if err != nil {
		ready <- err
		return err
	}
	defer func() {
		q.mu.Lock()
		q.ring = nil
		q.mu.Unlock()
		ring.Close()
	}()
	q.mu.Lock()
	q.ring = ring
	q.mu.Unlock()
	var cmd [ioCmdSize]byte
	for tag := 0; tag < q.depth; tag++ {
		encodeIOCmd(cmd[:], q.id, uint16(tag), 0, q.bufAddr(tag))
		if err := ring.URingCmd(q.charFD, ioOp(ioFetchReq, q.encoded), cmd[:], uint64(tag)); err != nil {
			ready <- err
			return err
		}
	}
	if err := ring.ArmWake(); err != nil {
		ready <- err
		return err
	}
	if err := ring.Enter(false); err != nil {
		ready <- err
		return err
	}
	ready <- nil
	stop := context.AfterFunc(ctx, ring.Wake)
	defer stop()

	closed := 0
	var cqes []uring.CQE
	var done []completion
	for closed < q.depth {
		// submit, then wait in Go's poller: a thread blocked in
		// io_uring_enter would keep its P, and the goroutines serving
		// the requests it just handed out could wait for the runtime to
		// take that P back
		if err := ring.Submit(); err != nil {
			return fmt.Errorf("ublk queue %d: %w", q.id, err)
		}
		if err := ring.Wait(); err != nil {
			return fmt.Errorf("ublk queue %d: %w", q.id, err)
		}
		cqes = ring.Reap(cqes[:0])
		started := uint64(0)
		for _, c := range cqes {
			if c.UserData == uring.WakeUserData {
				continue
			}
			tag := int(c.UserData)
			if c.Res != 0 {
				if c.Res != ioResAbort {
					q.log.Warn("ublk io command failed", "queue", q.id, "tag", tag, "errno", unix.Errno(-c.Res))
				}
				closed++
				continue
			}
			d := decodeIODesc(q.desc[tag*ioDescSize : (tag+1)*ioDescSize])
			q.handlers.Add(1)
			q.start(ctx, tag, d)
			started++
		}
		if started > 0 {
			q.stats.requests.Add(started)
			q.stats.fetches.Add(started)
			q.stats.wakeups.Add(1)
		}
		q.mu.Lock()
		done, q.done = q.done, done[:0]
		q.mu.Unlock()
		// after taking the results: one that failed because ctx ended
		// (the queue is abandoned) was added after it ended, and must
		// not reach the application as an error; the kernel issues
		// every uncommitted request again to the next server
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, c := range done {
			encodeIOCmd(cmd[:], q.id, c.tag, c.res, q.bufAddr(int(c.tag)))
			if err := ring.URingCmd(q.charFD, ioOp(ioCommitAndFetch, q.encoded), cmd[:], uint64(c.tag)); err != nil {
				return fmt.Errorf("ublk queue %d: %w", q.id, err)
			}
		}
		if len(done) > 0 {
			// submitted at the top of the loop, with the wake-up's read
			q.stats.commits.Add(1)
		}
		if err := ring.ArmWake(); err != nil {
			return fmt.Errorf("ublk queue %d: %w", q.id, err)
		}
	}
	return nil
}

// handle serves one request and hands its result to the queue's thread.
func (q *queue) handle(ctx context.Context, tag int, d ioDesc) {
	defer q.handlers.Done()
	var res int32
	if q.obs == nil {
		res = q.serve(ctx, tag, d)
	} else {
		c, start := observedCommand(d.op), time.Now()
		q.obs.Started(c)
		res = q.serve(ctx, tag, d)
		q.obs.Done(c, d.nrSectors<<sectorShift, time.Since(start), res < 0)
	}
	if q.batch {
		q.commit(ctx, tag, res)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.done) == 0 && q.ring != nil {
		q.ring.Wake()
	}
	q.done = append(q.done, completion{tag: uint16(tag), res: res})
}

// serve runs one request against the backend: the byte count for reads
// and writes, 0 for the others, or a negative errno.
func (q *queue) serve(ctx context.Context, tag int, d ioDesc) int32 {
	if d.op == opFlush {
		// a flush carries no range (its sector is whatever the block
		// layer left there)
		if f, ok := q.backend.(nbd.Flusher); ok {
			if err := f.Flush(ctx); err != nil {
				return errnoOf(err)
			}
		}
		return 0
	}
	// in sectors first: the kernel's 64-bit sector would overflow bytes
	size := uint64(q.backend.Size())
	if d.startSector > size>>sectorShift || uint64(d.nrSectors) > size>>sectorShift {
		return -int32(unix.EIO)
	}
	off := int64(d.startSector << sectorShift)
	n := int64(d.nrSectors) << sectorShift
	if uint64(off+n) > size {
		return -int32(unix.EIO)
	}
	switch d.op {
	case opRead, opWrite:
		if n > int64(q.maxIO) {
			return -int32(unix.EINVAL)
		}
		var buf []byte
		if q.userCopy {
			pb := q.pool.Get(int(n))
			defer q.pool.Put(pb)
			buf = *pb
		} else {
			buf = q.bufs[tag*q.maxIO : tag*q.maxIO+int(n)]
		}
		if d.op == opRead {
			got, err := q.backend.ReadAt(ctx, buf, off)
			if err != nil && !(errors.Is(err, io.EOF) && got <= len(buf)) {
				return errnoOf(err)
			}
			clear(buf[got:])
			if q.userCopy {
				if err := q.copyData(tag, buf, false); err != nil {
					q.log.Warn("ublk read not delivered", "error", err)
					return errnoOf(err)
				}
			}
			return int32(n)
		}
		if q.userCopy {
			if err := q.copyData(tag, buf, true); err != nil {
				q.log.Warn("ublk write's data not read", "error", err)
				return errnoOf(err)
			}
		}
		if _, err := q.backend.WriteAt(ctx, buf, off); err != nil {
			return errnoOf(err)
		}
		if d.flags&(ioFlagFUA>>8) != 0 {
			if f, ok := q.backend.(nbd.Flusher); ok {
				if err := f.Flush(ctx); err != nil {
					return errnoOf(err)
				}
			}
		}
		return int32(n)
	case opDiscard:
		if t, ok := q.backend.(nbd.Trimmer); ok {
			if err := t.Trim(ctx, off, n); err != nil {
				return errnoOf(err)
			}
		}
		return 0
	case opWriteZeroes:
		var flags nbd.ZeroFlags
		if d.flags&(ioFlagNoUnmap>>8) != 0 {
			flags |= nbd.ZeroNoHole
		}
		if z, ok := q.backend.(nbd.Zeroer); ok {
			if err := z.Zero(ctx, off, n, flags); err != nil {
				return errnoOf(err)
			}
			return 0
		}
		return -int32(unix.EOPNOTSUPP)
	}
	return -int32(unix.EOPNOTSUPP)
}

// observedCommand names a request's operation as an nbd.Observer knows
// it.
func observedCommand(op uint8) nbd.Command {
	switch op {
	case opRead:
		return nbd.CommandRead
	case opWrite:
		return nbd.CommandWrite
	case opFlush:
		return nbd.CommandFlush
	case opDiscard:
		return nbd.CommandTrim
	case opWriteZeroes:
		return nbd.CommandWriteZeroes
	}
	return nbd.Command(0xffff) // counted as "other"
}

// errnoOf turns a backend error into the negative errno ublk completes
// the request with: the error's own errno where it carries one, else EIO.
func errnoOf(err error) int32 {
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 {
		return -int32(errno)
	}
	return -int32(unix.EIO)
}
