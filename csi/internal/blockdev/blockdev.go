// Package blockdev works on the block device nodes the CSI node service
// serves volumes through: their device numbers, and their read-only
// policy.
//
// A read-only bind mount does not stop writes to a device node (the
// kernel checks a mount's read-only flag for regular files, directories
// and links, not for special files), so a device node published
// read-only would still open read-write. The whole device is made
// read-only instead (BLKROSET), which also fails writes through
// descriptors already open. It is one flag per device: every node of
// the device, at every path, is read-only or writable together.
package blockdev

import (
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Number returns the major and minor number of the block device node at
// path.
func Number(path string) (major, minor uint32, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, 0, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return 0, 0, fmt.Errorf("%s is not a block device", path)
	}
	return unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)), nil
}

// SetReadOnly sets or clears the read-only policy of the block device
// dev.
func SetReadOnly(dev string, ro bool) error {
	f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	v := 0
	if ro {
		v = 1
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.BLKROSET, v); err != nil {
		return fmt.Errorf("BLKROSET %d on %s: %w", v, dev, err)
	}
	return nil
}
