// Package uring is the small part of io_uring that ublk needs, through raw
// system calls: a ring of 128-byte SQEs (IORING_SETUP_SQE128, for
// URING_CMD with its 80-byte command area), submission of URING_CMD
// entries, reaping of completions, and a wake-up eventfd read through the
// ring so that a thread blocked waiting for completions can be woken by
// another goroutine or by a context's end; and rings of provided buffers
// for multishot commands (bufring.go). It has no locks: one goroutine at
// a time submits (URingCmd*, ArmWake, Enter) and one at a time reaps
// (Wait, Reap, BufRing.Recycle), which may be another once the wake-up
// is armed; Wake may be called from any.
package uring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Opcodes and flags of io_uring used here (include/uapi/linux/io_uring.h).
const (
	opRead     = 22
	opURingCmd = 46

	setupSQE128 = 1 << 10

	enterGetEvents = 1 << 0

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
)

// SQESize is the size of one submission queue entry of a Ring.
const SQESize = 128

// CmdSize is the size of the command area of a URING_CMD entry in a
// 128-byte SQE.
const CmdSize = 80

// WakeUserData is the user data of the completions of the ring's own
// wake-up read; callers must not use it.
const WakeUserData = ^uint64(0)

// ErrNoSQE means the submission queue is full: submit first.
var ErrNoSQE = errors.New("io_uring: submission queue full")

// ErrUnsupported means the kernel has no io_uring, or not with 128-byte
// SQEs (Linux 5.19+), or a policy forbids it.
var ErrUnsupported = errors.New("io_uring with 128-byte SQEs unavailable")

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// CQE is one completion.
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// Ring is one io_uring instance with 128-byte SQEs.
type Ring struct {
	fd             int
	file           *os.File        // fd, registered with Go's poller
	rc             syscall.RawConn // waits for completions without a thread
	sqMem, cqMem   []byte
	sqeMem         []byte
	sqHead, sqTail *uint32
	sqMask         uint32
	sqEntries      uint32
	sqArray        unsafe.Pointer
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           unsafe.Pointer
	// tail is the local submission tail; toSubmit how many entries
	// between the kernel's view and it wait for Enter.
	tail     uint32
	toSubmit uint32

	// wakeMu orders Wake (any goroutine) against Close: a Wake after
	// Close must not write to a descriptor number reused elsewhere.
	wakeMu   sync.RWMutex
	wakeFD   int
	wakeBuf  []byte // 8 bytes the kernel reads the eventfd into
	wakeLive bool   // a wake-up read is queued
}

// New sets up a ring with at least entries submission entries (the
// completion queue gets twice as many).
func New(entries uint32) (*Ring, error) {
	var p params
	p.flags = setupSQE128
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		if errno == unix.ENOSYS || errno == unix.EPERM || errno == unix.EINVAL {
			return nil, fmt.Errorf("io_uring_setup: %w (%w)", ErrUnsupported, errno)
		}
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &Ring{fd: int(fd), wakeFD: -1}
	if err := r.mapRings(&p); err != nil {
		r.Close()
		return nil, err
	}
	// the ring's fd polls readable while completions wait: registered
	// with Go's poller (non-blocking), Wait parks the goroutine instead
	// of holding a thread and its P in a system call
	if err := unix.SetNonblock(r.fd, true); err != nil {
		r.Close()
		return nil, fmt.Errorf("io_uring: %w", err)
	}
	r.file = os.NewFile(uintptr(r.fd), "io_uring")
	rc, err := r.file.SyscallConn()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("io_uring: %w", err)
	}
	r.rc = rc
	wfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	r.wakeFD = wfd
	// a page of its own: the kernel writes it while no Go pointer may
	// refer to it
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("mmap: %w", err)
	}
	r.wakeBuf = buf
	return r, nil
}

func (r *Ring) mapRings(p *params) error {
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*16)
	var err error
	r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap SQ ring: %w", err)
	}
	r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap CQ ring: %w", err)
	}
	r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*SQESize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap SQEs: %w", err)
	}
	sq := unsafe.Pointer(&r.sqMem[0])
	r.sqHead = (*uint32)(unsafe.Add(sq, p.sqOff.head))
	r.sqTail = (*uint32)(unsafe.Add(sq, p.sqOff.tail))
	r.sqMask = *(*uint32)(unsafe.Add(sq, p.sqOff.ringMask))
	r.sqEntries = *(*uint32)(unsafe.Add(sq, p.sqOff.ringEntries))
	r.sqArray = unsafe.Add(sq, p.sqOff.array)
	cq := unsafe.Pointer(&r.cqMem[0])
	r.cqHead = (*uint32)(unsafe.Add(cq, p.cqOff.head))
	r.cqTail = (*uint32)(unsafe.Add(cq, p.cqOff.tail))
	r.cqMask = *(*uint32)(unsafe.Add(cq, p.cqOff.ringMask))
	r.cqes = unsafe.Add(cq, p.cqOff.cqes)
	r.tail = atomic.LoadUint32(r.sqTail)
	return nil
}

// Close tears the ring down; the kernel cancels what is still in flight.
func (r *Ring) Close() error {
	for _, m := range [][]byte{r.sqeMem, r.cqMem, r.sqMem, r.wakeBuf} {
		if m != nil {
			_ = unix.Munmap(m)
		}
	}
	r.sqeMem, r.cqMem, r.sqMem, r.wakeBuf = nil, nil, nil, nil
	var err error
	switch {
	case r.file != nil:
		err = r.file.Close()
	case r.fd >= 0:
		err = unix.Close(r.fd)
	}
	r.fd, r.file = -1, nil
	r.wakeMu.Lock()
	if r.wakeFD >= 0 {
		_ = unix.Close(r.wakeFD)
		r.wakeFD = -1
	}
	r.wakeMu.Unlock()
	return err
}

// nextSQE returns the next free SQE, zeroed, and queues it for Enter.
func (r *Ring) nextSQE() ([]byte, error) {
	head := atomic.LoadUint32(r.sqHead)
	if r.tail-head >= r.sqEntries {
		return nil, ErrNoSQE
	}
	idx := r.tail & r.sqMask
	sqe := r.sqeMem[int(idx)*SQESize : int(idx+1)*SQESize]
	clear(sqe)
	*(*uint32)(unsafe.Add(r.sqArray, idx*4)) = idx
	r.tail++
	r.toSubmit++
	atomic.StoreUint32(r.sqTail, r.tail)
	return sqe, nil
}

// URingCmd queues an IORING_OP_URING_CMD on fd with command cmdOp and
// the command bytes cmd (at most CmdSize), completed with userData.
func (r *Ring) URingCmd(fd int, cmdOp uint32, cmd []byte, userData uint64) error {
	if len(cmd) > CmdSize {
		return fmt.Errorf("io_uring: command of %d bytes, at most %d", len(cmd), CmdSize)
	}
	if userData == WakeUserData {
		return errors.New("io_uring: user data reserved for wake-ups")
	}
	sqe, err := r.nextSQE()
	if err != nil {
		return err
	}
	sqe[0] = opURingCmd
	binary.LittleEndian.PutUint32(sqe[4:], uint32(int32(fd)))
	binary.LittleEndian.PutUint32(sqe[8:], cmdOp)
	binary.LittleEndian.PutUint64(sqe[32:], userData)
	copy(sqe[48:], cmd)
	return nil
}

// ArmWake queues the read of the wake-up eventfd unless one is queued:
// Wake then completes it with WakeUserData. Call it again after each
// such completion.
func (r *Ring) ArmWake() error {
	if r.wakeLive {
		return nil
	}
	sqe, err := r.nextSQE()
	if err != nil {
		return err
	}
	sqe[0] = opRead
	binary.LittleEndian.PutUint32(sqe[4:], uint32(int32(r.wakeFD)))
	binary.LittleEndian.PutUint64(sqe[16:], uint64(uintptr(unsafe.Pointer(&r.wakeBuf[0]))))
	binary.LittleEndian.PutUint32(sqe[24:], 8)
	binary.LittleEndian.PutUint64(sqe[32:], WakeUserData)
	r.wakeLive = true
	return nil
}

// Wake makes a pending or the next Enter that waits return (through the
// armed wake-up read). Safe from any goroutine, also during and after
// Close (then it does nothing).
func (r *Ring) Wake() {
	var one [8]byte
	binary.LittleEndian.PutUint64(one[:], 1)
	r.wakeMu.RLock()
	defer r.wakeMu.RUnlock()
	if r.wakeFD >= 0 {
		// raw, as Submit: an eventfd write never blocks, and the legacy
		// queues wake their thread this way per batch of results
		_, _, _ = unix.RawSyscall(unix.SYS_WRITE, uintptr(r.wakeFD), uintptr(unsafe.Pointer(&one[0])), uintptr(len(one)))
	}
}

// Enter submits the queued entries and, with wait, blocks until at
// least one completion is there. A wait a signal ends (the Go runtime's
// preemption signals) is waited again.
func (r *Ring) Enter(wait bool) error {
	for {
		var flags, minComplete uintptr
		if wait && r.ready() == 0 {
			flags, minComplete = enterGetEvents, 1
		}
		if r.toSubmit == 0 && flags == 0 {
			return nil
		}
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(r.toSubmit), minComplete, flags, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
		r.toSubmit -= uint32(n)
		if !wait || (r.toSubmit == 0 && r.ready() > 0) {
			return nil
		}
		// The kernel took only part, or a signal ended the wait once the
		// entries were submitted (the call then returns how many it
		// submitted, not EINTR): go round to submit the rest and wait.
	}
}

// Submit submits the queued entries and returns without waiting, with
// a raw system call: no syscall bookkeeping in the runtime, and no
// wake-up of its monitor thread, which entering a system call the usual
// way costs when that thread sleeps. Only for entries the kernel takes
// without blocking the submitter (ublk's I/O commands, which queue or
// complete at once); Enter for the rest.
func (r *Ring) Submit() error {
	for r.toSubmit > 0 {
		n, _, errno := unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(r.toSubmit), 0, 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
		if n == 0 {
			return fmt.Errorf("io_uring_enter: none of %d entries submitted", r.toSubmit)
		}
		r.toSubmit -= uint32(n)
	}
	return nil
}

// Wait blocks until at least one completion is there, parking the
// goroutine in Go's poller (no thread or P is held meanwhile). Submit
// with Enter(false) or Submit first.
func (r *Ring) Wait() error {
	if r.ready() > 0 {
		return nil
	}
	err := r.rc.Read(func(uintptr) bool { return r.ready() > 0 })
	if err != nil {
		return fmt.Errorf("io_uring: wait: %w", err)
	}
	return nil
}

func (r *Ring) ready() uint32 {
	return atomic.LoadUint32(r.cqTail) - atomic.LoadUint32(r.cqHead)
}

// Reap appends the available completions to dst and consumes them. A
// completion of the wake-up read is passed on (with WakeUserData) after
// the ring notes that it must be armed again.
func (r *Ring) Reap(dst []CQE) []CQE {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		p := unsafe.Add(r.cqes, (head&r.cqMask)*16)
		c := CQE{
			UserData: *(*uint64)(p),
			Res:      *(*int32)(unsafe.Add(p, 8)),
			Flags:    *(*uint32)(unsafe.Add(p, 12)),
		}
		if c.UserData == WakeUserData {
			r.wakeLive = false
		}
		dst = append(dst, c)
	}
	atomic.StoreUint32(r.cqHead, head)
	return dst
}
