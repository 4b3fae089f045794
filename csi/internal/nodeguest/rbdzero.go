package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// The block volume's zeroing check uses the last three 4 MiB objects of
// its image, past what its writer writes: one discarded (BLKDISCARD, NBD
// TRIM), one zeroed out (BLKZEROOUT: zero pages on a kernel without nbd
// write zeroes, NBD_CMD_WRITE_ZEROES with NO_HOLE on one with them), one
// punched (fallocate PUNCH_HOLE: NBD_CMD_WRITE_ZEROES without NO_HOLE,
// which a kernel without nbd write zeroes refuses). Each is written with
// random bytes first and must read back as zeroes; the host then checks
// with rbd diff that the discarded object, and the punched one when the
// kernel sent it, are no longer allocated in the image, and with rbd
// export that all read as zeroes. The guest reports
// "ZEROES <offset> <write_zeroes_max_bytes> <punch: ok|unsupported>".
const zeroRegion = 4 * mib

// zeroBlock runs the check on the published block device.
func (r *rbdScenario) zeroBlock() error {
	var st unix.Stat_t
	if err := unix.Stat(bTarget, &st); err != nil {
		return err
	}
	wz, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/queue/write_zeroes_max_bytes", unix.Major(st.Rdev), unix.Minor(st.Rdev)))
	if err != nil {
		return err
	}
	maxZeroes, err := strconv.ParseInt(strings.TrimSpace(string(wz)), 10, 64)
	if err != nil {
		return fmt.Errorf("write_zeroes_max_bytes %q: %w", wz, err)
	}
	f, err := os.OpenFile(bTarget, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	size, err := unix.IoctlGetUint64(int(f.Fd()), unix.BLKGETSIZE64)
	if err != nil {
		return err
	}
	off := int64(size) - 3*zeroRegion
	if written := max(r.block.res.Bytes, blockBytes); off < written {
		return fmt.Errorf("the block volume's writer wrote %d bytes, into the zeroing check's region at %d", written, off)
	}
	for i := range int64(3) {
		data := make([]byte, zeroRegion)
		rand.Read(data)
		if err := guestio.DirectIO(bTarget, data, off+i*zeroRegion); err != nil {
			return err
		}
	}
	ioctlRange := func(req uint, at int64) error {
		rng := [2]uint64{uint64(at), zeroRegion}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(req), uintptr(unsafe.Pointer(&rng))); e != 0 {
			return e
		}
		return nil
	}
	if err := ioctlRange(unix.BLKDISCARD, off); err != nil {
		return fmt.Errorf("BLKDISCARD: %w", err)
	}
	if err := ioctlRange(unix.BLKZEROOUT, off+zeroRegion); err != nil {
		return fmt.Errorf("BLKZEROOUT: %w", err)
	}
	punch := "ok"
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off+2*zeroRegion, zeroRegion)
	switch {
	case errors.Is(err, unix.EOPNOTSUPP) && maxZeroes == 0:
		punch = "unsupported"
	case err != nil:
		return fmt.Errorf("fallocate punch hole (write_zeroes_max_bytes %d): %w", maxZeroes, err)
	case maxZeroes == 0:
		return errors.New("fallocate punch hole succeeded on a device without write zeroes")
	}
	regions := int64(3)
	if punch != "ok" {
		regions = 2
	}
	back, err := directRead(bTarget, int(regions*zeroRegion), off)
	if err != nil {
		return err
	}
	if !bytes.Equal(back, make([]byte, len(back))) {
		return fmt.Errorf("the zeroed regions from %d do not read as zeroes", off)
	}
	r.Facts["block_write_zeroes_max_bytes"] = strconv.FormatInt(maxZeroes, 10)
	fmt.Printf("ZEROES %d %d %s\n", off, maxZeroes, punch)
	return nil
}
