package kernel

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The nbd driver's ioctls (include/uapi/linux/nbd.h: _IO(0xab, n)). They
// are the only interface of kernels without the nbd generic netlink family
// (before Linux 4.12) and still work on later ones, for devices not made
// through netlink.
const (
	ioctlSetSock    = 0xab00
	ioctlSetBlkSize = 0xab01
	ioctlSetSize    = 0xab02
	ioctlDoIt       = 0xab03
	ioctlClearSock  = 0xab04
	ioctlClearQue   = 0xab05
	ioctlDisconnect = 0xab08
	ioctlSetTimeout = 0xab09
	ioctlSetFlags   = 0xab0a
)

// ioctlStartTimeout bounds how long attachIoctl waits for the kernel to
// start the device once its sockets are in.
const ioctlStartTimeout = 10 * time.Second

// ioctlSetup is what the thread that configures a device hands the
// kernel.
type ioctlSetup struct {
	size, blockSize uint64
	timeout         time.Duration
	flags           ServerFlags
	sockets         []int
}

// useIoctl says whether the ioctl interface is all there is for cfg.
func useIoctl(cfg *AttachConfig, openErr error) bool {
	return IoctlOnly(openErr, cfg.Client.SysfsRoot)
}

// IoctlOnly reports whether openErr, an error of Open, means that the
// kernel has nbd loaded but no nbd netlink family here (a kernel before
// 4.12, or before 6.4 outside the initial network namespace:
// MissingFamilyCause tells which), so that only the ioctl interface works. sysfsRoot "" means /sys.
func IoctlOnly(openErr error, sysfsRoot string) bool {
	if !errors.Is(openErr, ErrNotLoaded) {
		return false
	}
	loaded, err := sysfsAt(sysfsRoot).nbdLoaded()
	return err == nil && loaded
}

// DisconnectIoctl asks the kernel to disconnect /dev/nbdN through the
// ioctl interface (NBD_DISCONNECT), from any process: how to unmap a
// device attached through ioctls (see IoctlOnly) from outside the
// process serving it. The kernel refuses devices made through netlink.
func DisconnectIoctl(index int) error {
	d := &ioctlDevice{path: devPath(index)}
	return d.disconnect()
}

// ioctlDevice is the kernel side of a device attached through ioctls: the
// thread blocked in NBD_DO_IT for as long as the kernel serves it.
type ioctlDevice struct {
	path  string
	ended chan struct{} // closed when NBD_DO_IT returned and the device was cleared
	err   error         // NBD_DO_IT's error, readable once ended is closed
}

// startIoctl configures path with setup on a thread of its own and starts
// it: the kernel lets only the task that added the first socket add more
// and start the device, and NBD_DO_IT blocks that task for as long as the
// device runs. It returns once the setup ioctls succeeded; ended is
// closed when the device stopped.
func startIoctl(path string, setup ioctlSetup) (*ioctlDevice, error) {
	d := &ioctlDevice{path: path, ended: make(chan struct{})}
	configured := make(chan error, 1)
	go func() {
		defer close(d.ended)
		// The thread's signal mask changes below, so it must end with this
		// goroutine: never unlocked.
		runtime.LockOSThread()
		// A signal interrupting NBD_DO_IT makes the kernel shut every
		// connection: nothing may be delivered to this thread.
		var all unix.Sigset_t
		for i := range all.Val {
			all.Val[i] = ^uint64(0)
		}
		if err := unix.PthreadSigmask(unix.SIG_BLOCK, &all, nil); err != nil {
			configured <- fmt.Errorf("blocking signals: %w", err)
			return
		}
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			configured <- fmt.Errorf("open %s: %w", path, err)
			return
		}
		defer unix.Close(fd)
		if err := configureIoctl(fd, setup); err != nil {
			// Drop the sockets added so far and the setup claim.
			_ = ioctl(fd, ioctlClearSock, 0)
			configured <- err
			return
		}
		configured <- nil
		d.err = ioctl(fd, ioctlDoIt, 0)
		if d.err != nil {
			d.err = fmt.Errorf("NBD_DO_IT: %w", d.err)
		}
		_ = ioctl(fd, ioctlClearQue, 0)
		_ = ioctl(fd, ioctlClearSock, 0)
	}()
	if err := <-configured; err != nil {
		<-d.ended
		return nil, err
	}
	return d, nil
}

// configureIoctl sends the setup ioctls; the device starts with
// NBD_DO_IT. The sockets go first: the first NBD_SET_SOCK claims the
// device for this thread, so that another process picking the same free
// device fails at once (EBUSY) instead of changing this one's size or
// flags, which the kernel lets anybody do.
func configureIoctl(fd int, s ioctlSetup) error {
	for i, sock := range s.sockets {
		if err := ioctl(fd, ioctlSetSock, uintptr(sock)); err != nil {
			return fmt.Errorf("NBD_SET_SOCK (connection %d): %w", i+1, err)
		}
	}
	type step struct {
		name string
		req  uintptr
		arg  uintptr
	}
	steps := []step{
		{"NBD_SET_BLKSIZE", ioctlSetBlkSize, uintptr(s.blockSize)},
		{"NBD_SET_SIZE", ioctlSetSize, uintptr(s.size)},
		{"NBD_SET_FLAGS", ioctlSetFlags, uintptr(s.flags)},
	}
	if secs := uintptr((s.timeout + time.Second - 1) / time.Second); secs > 0 {
		steps = append(steps, step{"NBD_SET_TIMEOUT", ioctlSetTimeout, secs})
	}
	for _, st := range steps {
		if err := ioctl(fd, st.req, st.arg); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
	}
	return nil
}

// waitRunning waits until the kernel shows the device running with its
// size, or it ended. NBD_DO_IT makes the pid attribute before it starts
// the receivers and sets the capacity last, so the pid alone is too early:
// a reader could still see an empty disk.
func (d *ioctlDevice) waitRunning(ctx context.Context, sys sysfs, index int, size int64) error {
	ctx, cancel := context.WithTimeout(ctx, ioctlStartTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if sys.running(index) {
			if n, err := sys.size(index); err == nil && n == size {
				return nil
			}
		}
		select {
		case <-d.ended:
			if d.err != nil {
				return d.err
			}
			return errors.New("the device stopped as it started")
		case <-ctx.Done():
			return fmt.Errorf("waiting for the kernel to start %s: %w", d.path, ctx.Err())
		case <-tick.C:
		}
	}
}

// disconnect asks the kernel to disconnect the device (NBD_DISCONNECT: it
// sends NBD_CMD_DISC on every connection); NBD_DO_IT returns once the
// server closed them.
func (d *ioctlDevice) disconnect() error { return d.control(ioctlDisconnect, 0, "NBD_DISCONNECT") }

// setSize changes the size of the running device.
func (d *ioctlDevice) setSize(size uint64) error {
	return d.control(ioctlSetSize, uintptr(size), "NBD_SET_SIZE")
}

// control sends one ioctl through a descriptor of its own: any thread may
// disconnect or resize a running device. Read-only is enough for the
// driver's ioctls, and a read-only device refuses to be opened for
// writing.
func (d *ioctlDevice) control(req, arg uintptr, name string) error {
	fd, err := unix.Open(d.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: open %s: %w", name, d.path, err)
	}
	defer unix.Close(fd)
	if err := ioctl(fd, req, arg); err != nil {
		return fmt.Errorf("%s %s: %w", name, d.path, err)
	}
	return nil
}

func ioctl(fd int, req, arg uintptr) error {
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, arg)
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return errno
	}
}

// freeIndexes lists the nbd devices the kernel is not running, in index
// order: candidates for an ioctl attach, which cannot ask the kernel for
// a free one.
func (s sysfs) freeIndexes() ([]int, error) { return s.devicesRunning(false) }

// devicesRunning lists, in index order, the nbd devices the kernel runs
// (running true) or those it does not.
func (s sysfs) devicesRunning(running bool) ([]int, error) {
	l, err := s.devices()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, i := range l {
		if s.running(i) == running {
			out = append(out, i)
		}
	}
	return out, nil
}

// running reports whether the kernel runs /dev/nbdN: it has a pid
// attribute from start to disconnect, through either interface.
func (s sysfs) running(index int) bool {
	_, err := os.Stat(s.dev(index, "pid"))
	return !errors.Is(err, fs.ErrNotExist)
}

// devPath is the device node of index under /dev.
func devPath(index int) string { return "/dev/nbd" + strconv.Itoa(index) }
