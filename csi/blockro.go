package csi

// Read-only publications of block volumes. A read-only bind mount does
// not stop writes to a device node (the kernel checks a mount's
// read-only flag for regular files, directories and links, not for
// special files), so a reader's device node would open read-write. The
// whole device is made read-only instead (BLKROSET), which also fails
// writes through descriptors already open. It is one flag per device, so
// a volume staged read-write on this node is published either read-only
// at every target or read-write at every target, never both at once.

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// setDeviceReadOnly sets or clears the read-only policy of the block
// device dev.
func setDeviceReadOnly(dev string, ro bool) error {
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
