package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/kernel"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// ioctlInterface attaches a Memory export through the nbd driver's ioctls,
// the fallback for kernels without the netlink family, over two
// connections: the kernel must show the size, block size and queues
// asked for, I/O through /dev/nbdN must reach the backend, an online
// resize must show, Release must refuse (no reattach without netlink)
// and leave the device working, and Detach must free it.
func (s *scenario) ioctlInterface(ctx context.Context) error {
	mem, err := nbd.NewMemory(32 * mib)
	if err != nil {
		return err
	}
	setupErrs := []string{"Cannot use ioctl interface on a netlink controlled device", "Device being setup by another task"}
	before := make([]int, len(setupErrs))
	for i, m := range setupErrs {
		before[i] = countDmesg(m)
	}
	dev, err := kernel.Attach(ctx, kernel.AttachConfig{
		Backend: mem, BlockSize: 4096, Conns: 2, Cookie: "ioctl-0001", Ioctl: true,
		Index: kernel.AnyIndex, Timeout: 30 * time.Second, Logger: logger("scenario"),
	})
	if err != nil {
		return err
	}
	idx := dev.Index()
	fmt.Printf("    attached %s through %s, conns=%d\n", dev.Path(), dev.Interface(), dev.Conns())
	if dev.Interface() != "ioctl" || dev.Reattachable() || dev.Cookie() != "" {
		return fmt.Errorf("interface %q, reattachable %v, cookie %q: want ioctl, no cookie", dev.Interface(), dev.Reattachable(), dev.Cookie())
	}
	if err := expectSysfs(idx, map[string]string{
		"size": strconv.Itoa(32 * mib / 512), "queue/logical_block_size": "4096", "ro": "0",
	}); err != nil {
		return err
	}
	// Only a netlink CONNECT with an identifier makes the backend file.
	if _, err := os.Stat(fmt.Sprintf("/sys/block/nbd%d/backend", idx)); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("nbd%d has a backend attribute (%v): no cookie expected through ioctls", idx, err)
	}
	// listed as running, with its two queues and no cookie, from sysfs
	// alone: what `purerbd device list` shows on a kernel without netlink;
	// its pid a thread of this process, which started it
	if m, err := listed(idx); err != nil || m != (kernel.Mapped{Index: idx, Size: 32 * mib, Connections: 2, PID: m.PID}) || tgidOf(m.PID) != os.Getpid() {
		return fmt.Errorf("kernel.List: %+v, %v; want size 32 MiB, 2 connections, no cookie, a pid of process %d", m, err, os.Getpid())
	}
	if st, ok, err := s.client.DeviceStatus(ctx, idx); err != nil || !ok || !st.Connected {
		return fmt.Errorf("netlink STATUS of the ioctl device: %+v %v %v", st, ok, err)
	}
	if err := s.directIOToBackend(ctx, dev, mem, "ioctl"); err != nil {
		return err
	}
	if err := dev.Resize(ctx, 48*mib); err != nil {
		return err
	}
	if err := expectSysfs(idx, map[string]string{"size": strconv.Itoa(48 * mib / 512)}); err != nil {
		return fmt.Errorf("after resize: %w", err)
	}
	if err := dev.Release(ctx); !errors.Is(err, kernel.ErrReattachUnsupported) {
		return fmt.Errorf("release of an ioctl device: %v, want ErrReattachUnsupported", err)
	}
	// Still served after the refused release, at the new end too.
	tail := make([]byte, 1*mib)
	rand.Read(tail)
	if err := guestio.DirectIO(dev.Path(), tail, 47*mib); err != nil {
		return fmt.Errorf("after the refused release: %w", err)
	}
	t := time.Now()
	if err := dev.Detach(ctx); err != nil {
		return err
	}
	if err := s.endedInOrder(ctx, dev, "Detach"); err != nil {
		return err
	}
	if _, err := os.Stat(fmt.Sprintf("/sys/block/nbd%d/pid", idx)); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("nbd%d still has a pid attribute after detach (%v)", idx, err)
	}
	s.Timings["ioctl: detach until free"] = time.Since(t).Seconds()
	if m, err := listed(idx); err == nil || !errors.Is(err, errNotListed) {
		return fmt.Errorf("kernel.List after detach: %+v, %v; want the device gone", m, err)
	}
	if err := s.ioctlUnmapElsewhere(ctx, mem); err != nil {
		return fmt.Errorf("unmapped by another party: %w", err)
	}
	for i, m := range setupErrs {
		if n := countDmesg(m) - before[i]; n > 0 {
			return fmt.Errorf("the kernel logged %q %d times", m, n)
		}
	}
	return nil
}

// ioctlUnmapElsewhere attaches mem through ioctls again and disconnects
// it the way `purerbd device unmap` does on a kernel without netlink
// (kernel.DisconnectIoctl): the serving device sees its end as an
// orderly one, and the device is freed.
func (s *scenario) ioctlUnmapElsewhere(ctx context.Context, mem *nbd.Memory) error {
	dev, err := kernel.Attach(ctx, kernel.AttachConfig{
		Backend: mem, BlockSize: 4096, Ioctl: true, Index: kernel.AnyIndex, Logger: logger("scenario"),
	})
	if err != nil {
		return err
	}
	if err := kernel.DisconnectIoctl(dev.Index()); err != nil {
		return err
	}
	return s.endedInOrder(ctx, dev, "NBD_DISCONNECT")
}

// endedInOrder checks that dev stopped serving after an orderly
// disconnect (what), without an error, and that the kernel freed it.
func (s *scenario) endedInOrder(ctx context.Context, dev *kernel.Device, what string) error {
	select {
	case <-dev.Done():
	case <-time.After(10 * time.Second):
		return fmt.Errorf("device not done after %s", what)
	}
	if err := dev.Err(); err != nil {
		return fmt.Errorf("after %s: %w", what, err)
	}
	return s.waitFree(ctx, dev.Index())
}

// errNotListed: kernel.List does not show the device.
var errNotListed = errors.New("not listed")

// listed returns device idx as kernel.List shows it.
func listed(idx int) (kernel.Mapped, error) {
	l, err := kernel.List("")
	if err != nil {
		return kernel.Mapped{}, err
	}
	for _, m := range l {
		if m.Index == idx {
			return m, nil
		}
	}
	return kernel.Mapped{}, fmt.Errorf("nbd%d: %w (list %+v)", idx, errNotListed, l)
}

// tgidOf is the process of thread tid, from /proc (0 if unknown).
func tgidOf(tid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
