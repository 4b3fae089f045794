package uring

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Constants of provided buffer rings and multishot commands
// (include/uapi/linux/io_uring.h).
const (
	registerPbufRing   = 22 // IORING_REGISTER_PBUF_RING
	unregisterPbufRing = 23 // IORING_UNREGISTER_PBUF_RING

	sqeBufferSelect = 1 << 5 // IOSQE_BUFFER_SELECT
	uringCmdMulti   = 1 << 1 // IORING_URING_CMD_MULTISHOT

	// CQEFlagBuffer says a completion used a provided buffer, whose ID
	// is the flags' upper 16 bits; CQEFlagMore that a multishot command
	// goes on after this completion.
	CQEFlagBuffer = 1 << 0
	CQEFlagMore   = 1 << 1
	cqeBufShift   = 16

	bufRingEntrySize = 16 // struct io_uring_buf
)

// BufRing is a ring of provided buffers (IORING_REGISTER_PBUF_RING) of
// one buffer group, each consumed whole by one completion: the kernel
// picks a buffer for each completion of a command with buffer select,
// and Recycle gives it back. Only one goroutine may call Recycle.
type BufRing struct {
	r       *Ring
	group   uint16
	entries uint16
	size    int
	ring    []byte // the entries, shared with the kernel
	bufs    []byte // entries buffers of size bytes
	tail    uint16
}

// RegisterBufRing sets up buffer group group with entries (a power of
// two) buffers of size bytes, all handed to the kernel.
func (r *Ring) RegisterBufRing(group uint16, entries, size int) (*BufRing, error) {
	if entries <= 0 || entries > 1<<15 || entries&(entries-1) != 0 {
		return nil, fmt.Errorf("io_uring: buffer ring of %d entries, not a power of two up to 32768", entries)
	}
	if size <= 0 || size > 1<<20 {
		return nil, fmt.Errorf("io_uring: provided buffers of %d bytes", size)
	}
	b := &BufRing{r: r, group: group, entries: uint16(entries), size: size}
	var err error
	// memory of its own, page-aligned as the kernel wants it and never
	// moved by Go's collector
	b.ring, err = unix.Mmap(-1, 0, (entries*bufRingEntrySize+4095)&^4095, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("io_uring: buffer ring: %w", err)
	}
	b.bufs, err = unix.Mmap(-1, 0, (entries*size+4095)&^4095, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		_ = unix.Munmap(b.ring)
		return nil, fmt.Errorf("io_uring: provided buffers: %w", err)
	}
	// struct io_uring_buf_reg: ring_addr, ring_entries, bgid, flags, resv[3]
	var reg [40]byte
	binary.LittleEndian.PutUint64(reg[0:], uint64(uintptr(unsafe.Pointer(&b.ring[0]))))
	binary.LittleEndian.PutUint32(reg[8:], uint32(entries))
	binary.LittleEndian.PutUint16(reg[12:], group)
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerPbufRing, uintptr(unsafe.Pointer(&reg[0])), 1, 0, 0)
	if errno != 0 {
		b.unmap()
		return nil, fmt.Errorf("io_uring: register buffer ring: %w", errno)
	}
	for id := range uint16(entries) {
		b.Recycle(id)
	}
	return b, nil
}

func (b *BufRing) unmap() {
	_ = unix.Munmap(b.ring)
	_ = unix.Munmap(b.bufs)
	b.ring, b.bufs = nil, nil
}

// Close unregisters the group and frees its memory; the ring must have
// no command left that selects from it.
func (b *BufRing) Close() {
	if b.ring == nil {
		return
	}
	var reg [40]byte
	binary.LittleEndian.PutUint16(reg[12:], b.group)
	if b.r.fd >= 0 {
		_, _, _ = unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(b.r.fd), unregisterPbufRing, uintptr(unsafe.Pointer(&reg[0])), 1, 0, 0)
	}
	b.unmap()
}

// Group returns the buffer group's ID, for commands that select from it.
func (b *BufRing) Group() uint16 { return b.group }

// Buf returns buffer id's first n bytes (as a completion filled them).
func (b *BufRing) Buf(id uint16, n int) ([]byte, error) {
	if id >= b.entries || n < 0 || n > b.size {
		return nil, fmt.Errorf("io_uring: completion names buffer %d with %d bytes, the group has %d of %d", id, n, b.entries, b.size)
	}
	off := int(id) * b.size
	return b.bufs[off : off+n], nil
}

// Recycle hands buffer id back to the kernel.
func (b *BufRing) Recycle(id uint16) {
	e := b.ring[int(b.tail&(b.entries-1))*bufRingEntrySize:]
	binary.LittleEndian.PutUint64(e[0:], uint64(uintptr(unsafe.Pointer(&b.bufs[int(id)*b.size]))))
	binary.LittleEndian.PutUint32(e[8:], uint32(b.size))
	binary.LittleEndian.PutUint16(e[12:], id)
	b.tail++
	// the ring's tail is the first entry's last two bytes; storing it
	// publishes the entry (a release store)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b.ring[12])), uint32(binary.LittleEndian.Uint16(b.ring[12:14]))|uint32(b.tail)<<16)
}

// BufferID returns the provided buffer a completion used, if any.
func (c CQE) BufferID() (uint16, bool) {
	return uint16(c.Flags >> cqeBufShift), c.Flags&CQEFlagBuffer != 0
}

// URingCmdAddr queues a URING_CMD like URingCmd whose SQE also carries
// a user buffer (addr, len), which the command reads.
func (r *Ring) URingCmdAddr(fd int, cmdOp uint32, cmd []byte, userData uint64, buf []byte) error {
	if err := r.URingCmd(fd, cmdOp, cmd, userData); err != nil {
		return err
	}
	sqe := r.lastSQE()
	binary.LittleEndian.PutUint64(sqe[16:], uint64(uintptr(unsafe.Pointer(&buf[0]))))
	binary.LittleEndian.PutUint32(sqe[24:], uint32(len(buf)))
	return nil
}

// URingCmdMultishot queues a multishot URING_CMD whose completions each
// take a buffer of group b.
func (r *Ring) URingCmdMultishot(fd int, cmdOp uint32, cmd []byte, userData uint64, b *BufRing) error {
	if err := r.URingCmd(fd, cmdOp, cmd, userData); err != nil {
		return err
	}
	sqe := r.lastSQE()
	sqe[1] |= sqeBufferSelect
	binary.LittleEndian.PutUint32(sqe[28:], uringCmdMulti)
	binary.LittleEndian.PutUint16(sqe[40:], b.group)
	return nil
}

// lastSQE is the entry nextSQE returned last.
func (r *Ring) lastSQE() []byte {
	idx := (r.tail - 1) & r.sqMask
	return r.sqeMem[int(idx)*SQESize : int(idx+1)*SQESize]
}
