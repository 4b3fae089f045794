package guestbench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The load runs its deeper block-device cases as a C program does:
// one thread keeps the requests in flight through Linux native AIO
// (io_submit, io_getevents), with raw system calls, like fio's libaio
// engine with its default batching (each request submitted on its own,
// completions taken as they come, at least one at a time).
//
// Through goroutines with pread and pwrite, each request in flight
// held a thread of its own blocked in the kernel, and each completion
// woke one of those threads. Under TCG every such thread that lands on
// the vCPU a userspace server runs on trades it with that server, and
// each trade flushes the emulator's software TLB; krbd, with no server
// to trade with, hardly pays for them. A raw io_getevents holds the
// goroutine's P while it waits, which is the one P the load needs.

// aioCtx is a Linux AIO context.
type aioCtx struct{ id uintptr }

// newAIOCtx sets up a context with room for depth requests in flight.
func newAIOCtx(depth int) (*aioCtx, error) {
	var id uintptr
	if _, _, errno := unix.RawSyscall(unix.SYS_IO_SETUP, uintptr(depth), uintptr(unsafe.Pointer(&id)), 0); errno != 0 {
		return nil, fmt.Errorf("io_setup(%d): %w", depth, errno)
	}
	return &aioCtx{id: id}, nil
}

func (a *aioCtx) close() {
	_, _, _ = unix.RawSyscall(unix.SYS_IO_DESTROY, a.id, 0, 0)
}

// iocb is the kernel's struct iocb (64 bytes, little-endian fields).
type iocb [64]byte

const (
	iocbCmdPread  = 0
	iocbCmdPwrite = 1
)

// set fills b for a read or write of buf at off on fd, tagged data.
func (b *iocb) set(data uint64, write bool, fd int, buf []byte, off int64) {
	*b = iocb{}
	binary.LittleEndian.PutUint64(b[0:], data)
	op := uint16(iocbCmdPread)
	if write {
		op = iocbCmdPwrite
	}
	binary.LittleEndian.PutUint16(b[16:], op)
	binary.LittleEndian.PutUint32(b[20:], uint32(fd))
	binary.LittleEndian.PutUint64(b[24:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))))
	binary.LittleEndian.PutUint64(b[32:], uint64(len(buf)))
	binary.LittleEndian.PutUint64(b[40:], uint64(off))
}

// submit hands one request to the kernel.
func (a *aioCtx) submit(b *iocb) error {
	ptrs := [1]uintptr{uintptr(unsafe.Pointer(b))}
	for {
		n, _, errno := unix.RawSyscall(unix.SYS_IO_SUBMIT, a.id, 1, uintptr(unsafe.Pointer(&ptrs[0])))
		switch {
		case errno == unix.EINTR || errno == unix.EAGAIN:
			continue
		case errno != 0:
			return fmt.Errorf("io_submit: %w", errno)
		case n != 1:
			return fmt.Errorf("io_submit: the kernel took %d of 1 requests", n)
		}
		return nil
	}
}

// aioEvent is the kernel's struct io_event.
type aioEvent struct {
	data, obj uint64
	res, res2 int64
}

// wait fills evs with at least one completion, waiting up to timeout
// for the first, and returns how many it filled (0 when the time ran
// out).
func (a *aioCtx) wait(evs []aioEvent, timeout time.Duration) (int, error) {
	ts := unix.NsecToTimespec(int64(timeout))
	for {
		n, _, errno := unix.RawSyscall6(unix.SYS_IO_GETEVENTS, a.id, 1, uintptr(len(evs)), uintptr(unsafe.Pointer(&evs[0])), uintptr(unsafe.Pointer(&ts)), 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, fmt.Errorf("io_getevents: %w", errno)
		}
		return int(n), nil
	}
}

// runAIO runs c on dev for d over its first span bytes from one
// goroutine: c.QD requests kept in flight through one O_DIRECT
// descriptor and Linux AIO, each slot with a page-aligned buffer of its
// own; sequential workloads wrap around the span.
func runAIO(ctx context.Context, dev string, span int64, c ioCase, d time.Duration) (ioResult, error) {
	blocks, err := spanBlocks(dev, span, c)
	if err != nil {
		return ioResult{}, err
	}
	f, err := openDirect(dev, c)
	if err != nil {
		return ioResult{}, err
	}
	defer f.Close()
	bufs, err := alignedBuf(c.QD * c.BS)
	if err != nil {
		return ioResult{}, err
	}
	defer syscall.Munmap(bufs)
	a, err := newAIOCtx(c.QD)
	if err != nil {
		return ioResult{}, fmt.Errorf("%s: %w", dev, err)
	}
	// the kernel may still hold requests when this returns early: it
	// waits for them as it destroys the context, which is
	// done before the buffers go
	defer a.close()
	if c.Write {
		_, _ = rand.Read(bufs)
	}
	fd := int(f.Fd())
	cbs := make([]iocb, c.QD)
	started := make([]time.Time, c.QD)
	evs := make([]aioEvent, c.QD)
	lat := make([]time.Duration, 0, 4096)
	var next int64
	issue := func(slot int) error {
		blk := next % blocks
		if c.Rand {
			blk = mrand.Int64N(blocks)
		}
		next++
		cbs[slot].set(uint64(slot), c.Write, fd, bufs[slot*c.BS:(slot+1)*c.BS], blk*int64(c.BS))
		started[slot] = time.Now()
		return a.submit(&cbs[slot])
	}
	t0 := time.Now()
	deadline := t0.Add(d)
	inFlight := 0
	var failed error
	for slot := range c.QD {
		if err := issue(slot); err != nil {
			failed = err
			break
		}
		inFlight++
	}
	for inFlight > 0 {
		n, err := a.wait(evs, 100*time.Millisecond)
		if err != nil {
			return ioResult{}, fmt.Errorf("%s %s: %w", dev, c.Name, err)
		}
		now := time.Now()
		for _, e := range evs[:n] {
			inFlight--
			slot := int(e.data)
			if slot >= c.QD {
				return ioResult{}, fmt.Errorf("%s %s: a completion for slot %d of %d", dev, c.Name, slot, c.QD)
			}
			switch {
			case e.res < 0:
				failed = firstErr(failed, &os.PathError{Op: aioOpName(c.Write), Path: dev, Err: syscall.Errno(-e.res)})
			case e.res != int64(c.BS):
				failed = firstErr(failed, fmt.Errorf("%s %s: %d of %d bytes", aioOpName(c.Write), dev, e.res, c.BS))
			default:
				lat = append(lat, now.Sub(started[slot]))
			}
			if failed != nil || ctx.Err() != nil || now.After(deadline) {
				continue
			}
			if err := issue(slot); err != nil {
				failed = err
				continue
			}
			inFlight++
		}
	}
	var r ioResult
	r.seconds = time.Since(t0).Seconds()
	if failed != nil {
		return r, fmt.Errorf("%s %s: %w", dev, c.Name, failed)
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	r.setLatencies(lat, c.BS)
	return r, nil
}

// firstErr keeps the first of two errors.
func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func aioOpName(write bool) string {
	if write {
		return "aio pwrite"
	}
	return "aio pread"
}
