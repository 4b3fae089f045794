package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/purerbd/purerbd/nbd/ublk"
)

// guestTag is the tag the scenario's first device carries.
const guestTag = 0x7075726572626421

// findCheck finds the device by its tag, as a process that did not add
// it would, and checks that no device answers to another tag.
func findCheck(ctx context.Context, dev *ublk.Device) error {
	info, err := ublk.Find(ctx, guestTag)
	if err != nil {
		return err
	}
	if int(info.ID) != dev.ID() || info.Tag != guestTag || dev.Tag() != guestTag {
		return fmt.Errorf("find(%#x) gave device %d tagged %#x; the device is %d", uint64(guestTag), info.ID, info.Tag, dev.ID())
	}
	if _, err := ublk.Find(ctx, guestTag+1); !errors.Is(err, ublk.ErrNoDevice) {
		return fmt.Errorf("find of a tag no device has: %v, want ErrNoDevice", err)
	}
	return nil
}

// resizeCheck shrinks the device to half and grows it back, reading
// its size in sysfs, where the kernel has UPDATE_SIZE; elsewhere Resize
// must say the kernel cannot.
func (s *scenario) resizeCheck(ctx context.Context, dev *ublk.Device, features uint64) error {
	full, err := sysSize(dev)
	if err != nil {
		return err
	}
	if features&ublk.FeatureUpdateSize == 0 {
		if err := dev.Resize(ctx, full/2); !errors.Is(err, ublk.ErrNoResize) {
			return fmt.Errorf("resize without UPDATE_SIZE: %v, want ErrNoResize", err)
		}
		s.Facts["resize"] = "refused: no UPDATE_SIZE"
		return nil
	}
	for _, want := range []int64{full / 2, full} {
		rctx, cancel := context.WithTimeout(ctx, resizeTimeout)
		err := dev.Resize(rctx, want)
		cancel()
		if err != nil {
			if rctx.Err() != nil {
				dumpStacks()
			}
			return fmt.Errorf("resize to %d bytes: %w", want, err)
		}
		got, err := sysSize(dev)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("after Resize(%d) the block device has %d bytes", want, got)
		}
	}
	s.Facts["resize"] = "ok"
	return nil
}

// resizeTimeout bounds one UPDATE_SIZE: it answers in milliseconds, and
// one that never answers should fail the step with the stacks that show
// where it waits rather than the whole VM's timeout.
const resizeTimeout = time.Minute

// sysSize reads the block device's size from sysfs, in bytes.
func sysSize(dev *ublk.Device) (int64, error) {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev.Path()), "size"))
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n * 512, err
}
