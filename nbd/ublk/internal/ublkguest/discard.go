package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
	"github.com/purerbd/purerbd/nbd/ublk"
)

// Block device ioctls (include/uapi/linux/fs.h): _IO(0x12, 119) and
// _IO(0x12, 127), each taking a {start, length} pair in bytes.
const (
	blkDiscard = 0x1277
	blkZeroOut = 0x127f
)

func blkRange(dev string, req uintptr, off, length uint64) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	r := [2]uint64{off, length}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), req, uintptr(unsafe.Pointer(&r))); errno != 0 {
		return errno
	}
	return nil
}

// discardChecks writes data, discards it (BLKDISCARD: the Memory
// backend frees the chunks) and zeroes another written range
// (BLKZEROOUT: write zeroes), and checks both in the backend.
func discardChecks(ctx context.Context, dev string, mem *nbd.Memory) error {
	data := make([]byte, 2*mib)
	rand.Read(data)
	const off = 8 * mib
	if err := guestio.DirectIO(dev, data, off); err != nil {
		return err
	}
	before := mem.AllocatedBytes()
	if err := blkRange(dev, blkDiscard, off, mib); err != nil {
		return fmt.Errorf("BLKDISCARD: %w", err)
	}
	if after := mem.AllocatedBytes(); after != before-mib {
		return fmt.Errorf("the backend holds %d bytes after a 1 MiB discard, %d before", after, before)
	}
	if err := blkRange(dev, blkZeroOut, off+mib, mib); err != nil {
		return fmt.Errorf("BLKZEROOUT: %w", err)
	}
	got := make([]byte, 2*mib)
	if _, err := mem.ReadAt(ctx, got, off); err != nil {
		return err
	}
	if !bytes.Equal(got, make([]byte, 2*mib)) {
		return errors.New("the discarded and zeroed ranges do not read as zeroes in the backend")
	}
	return nil
}

// busyCheck asks for a recovery of a device whose server is alive: the
// kernel refuses, and the error says ErrBusy.
func busyCheck(ctx context.Context, id int) error {
	c, err := ublk.OpenControl(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	err = c.StartUserRecovery(ctx, id)
	if !errors.Is(err, ublk.ErrBusy) {
		return fmt.Errorf("START_USER_RECOVERY of a served device: %v, want ErrBusy", err)
	}
	info, err := c.DevInfo(ctx, id)
	if err != nil {
		return err
	}
	if info.State != ublk.StateLive || int(info.ServerPID) != os.Getpid() {
		return fmt.Errorf("device info %+v: want live, served by pid %d", info, os.Getpid())
	}
	return nil
}
