package ublk

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/nbd/ublk/internal/uring"
)

// ControlPath is the ublk control device.
const ControlPath = "/dev/ublk-control"

// Control sends control commands to ublk_drv through /dev/ublk-control.
// Its methods may be called from several goroutines; they run one at a
// time. A command whose context ends before the kernel answers leaves
// the Control refusing further commands: open a new one.
type Control struct {
	mu       sync.Mutex
	f        *os.File
	ring     *uring.Ring
	scratch  []byte // page the kernel reads and writes command data in
	seq      uint64
	encoded  bool   // the kernel takes ioctl-encoded command numbers
	features uint64 // UBLK_F_* the kernel knows (0 before GET_FEATURES existed)
	// abandoned is set when a command's context ended before the kernel
	// answered: the kernel may still write the scratch page, so no
	// further command may use it
	abandoned error
}

// OpenControl opens /dev/ublk-control (ublk_drv must be loaded: see
// LoadModule) and asks the kernel which features it has. It returns an
// error wrapping ErrUnsupported when the kernel has no ublk.
func OpenControl(ctx context.Context) (*Control, error) {
	f, err := os.OpenFile(ControlPath, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w (is ublk_drv loaded?)", ErrUnsupported, err)
		}
		return nil, fmt.Errorf("ublk: %w", err)
	}
	ring, err := uring.New(4)
	if err != nil {
		f.Close()
		if errors.Is(err, uring.ErrUnsupported) {
			return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
		}
		return nil, fmt.Errorf("ublk: %w", err)
	}
	scratch, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		ring.Close()
		f.Close()
		return nil, fmt.Errorf("ublk: mmap: %w", err)
	}
	c := &Control{f: f, ring: ring, scratch: scratch}
	// GET_FEATURES (Linux 6.5+) exists only ioctl-encoded; a kernel
	// without it takes the plain command numbers.
	c.encoded = true
	buf, err := c.do(ctx, "features", cmdGetFeatures, ctrlCmd{devID: anyDevice, queueID: noQueue}, make([]byte, featuresSize))
	if err == nil {
		c.features = binary.LittleEndian.Uint64(buf)
	} else {
		if ctx.Err() != nil {
			c.Close()
			return nil, err
		}
		c.encoded = false
	}
	return c, nil
}

// Features returns the UBLK_F_* flags the kernel supports, or 0 when it
// is too old to say (before Linux 6.5).
func (c *Control) Features() uint64 { return c.features }

// Close releases the control device.
func (c *Control) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ring != nil {
		c.ring.Close()
		c.ring = nil
	}
	if c.scratch != nil {
		_ = unix.Munmap(c.scratch)
		c.scratch = nil
	}
	return c.f.Close()
}

// do runs one control command. data, when not nil, is copied to the
// scratch page that cmd.addr then points to, and the page's content
// (len(data) bytes) is returned after the command.
func (c *Control) do(ctx context.Context, op string, nr uint32, cmd ctrlCmd, data []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	devID := int(int32(cmd.devID))
	if c.ring == nil {
		return nil, &OpError{Op: op, DevID: devID, Err: os.ErrClosed}
	}
	if c.abandoned != nil {
		return nil, &OpError{Op: op, DevID: devID, Err: c.abandoned}
	}
	if data != nil {
		copy(c.scratch, data)
		cmd.addr = uint64(uintptr(unsafe.Pointer(&c.scratch[0])))
		cmd.length = uint16(len(data))
	}
	c.seq++
	seq := c.seq
	if err := c.ring.URingCmd(int(c.f.Fd()), ctrlOp(nr, c.encoded), cmd.encode(), seq); err != nil {
		return nil, &OpError{Op: op, DevID: devID, Err: err}
	}
	if err := c.ring.ArmWake(); err != nil {
		return nil, &OpError{Op: op, DevID: devID, Err: err}
	}
	stop := context.AfterFunc(ctx, c.ring.Wake)
	defer stop()
	var cqes []uring.CQE
	for {
		// waiting in Go's poller keeps no P: START_DEV lasts until the
		// kernel has read the partition table through the queues, whose
		// goroutines need one
		if err := c.ring.Enter(false); err != nil {
			return nil, &OpError{Op: op, DevID: devID, Err: err}
		}
		if err := c.ring.Wait(); err != nil {
			return nil, &OpError{Op: op, DevID: devID, Err: err}
		}
		cqes = c.ring.Reap(cqes[:0])
		for _, cqe := range cqes {
			if cqe.UserData == seq {
				if cqe.Res < 0 {
					return nil, &OpError{Op: op, DevID: devID, Err: unix.Errno(-cqe.Res)}
				}
				if data == nil {
					return nil, nil
				}
				return append([]byte(nil), c.scratch[:len(data)]...), nil
			}
		}
		if err := ctx.Err(); err != nil {
			// the command stays with the kernel, which may still write
			// the scratch page: this Control takes no more commands
			c.abandoned = fmt.Errorf("an earlier %s command was abandoned (%w): open a new Control", op, err)
			return nil, &OpError{Op: op, DevID: devID, Err: err}
		}
		if err := c.ring.ArmWake(); err != nil {
			return nil, &OpError{Op: op, DevID: devID, Err: err}
		}
	}
}

// AddDev adds a device (ADD_DEV) as info describes it (ID -1 for any
// free one) and returns what the kernel made of it: its id, and the
// flags it kept of those asked for.
func (c *Control) AddDev(ctx context.Context, info DevInfo) (DevInfo, error) {
	b, err := c.do(ctx, "add", cmdAddDev, ctrlCmd{devID: info.ID, queueID: noQueue}, info.encode())
	if err != nil {
		return DevInfo{}, err
	}
	d, err := decodeDevInfo(b)
	if err != nil {
		return DevInfo{}, &OpError{Op: "add", DevID: -1, Err: err}
	}
	return d, nil
}

// DevInfo returns the kernel's description of device id (GET_DEV_INFO).
func (c *Control) DevInfo(ctx context.Context, id int) (DevInfo, error) {
	b, err := c.do(ctx, "info", cmdGetDevInfo, ctrlCmd{devID: uint32(id), queueID: noQueue}, make([]byte, devInfoSize))
	if err != nil {
		return DevInfo{}, err
	}
	d, err := decodeDevInfo(b)
	if err != nil {
		return DevInfo{}, &OpError{Op: "info", DevID: id, Err: err}
	}
	return d, nil
}

// SetParams sets the parameters of a device not started yet.
func (c *Control) SetParams(ctx context.Context, id int, p Params) error {
	_, err := c.do(ctx, "set-params", cmdSetParams, ctrlCmd{devID: uint32(id), queueID: noQueue}, p.encode())
	return err
}

// StartDev makes the block device (START_DEV). The kernel waits until
// every queue has fetched all its requests, and reads the partition
// table through them: the queues must be serving.
func (c *Control) StartDev(ctx context.Context, id, pid int) error {
	_, err := c.do(ctx, "start", cmdStartDev, ctrlCmd{devID: uint32(id), queueID: noQueue, data: [2]uint64{uint64(pid)}}, nil)
	return err
}

// StopDev removes the block device (STOP_DEV); the queues' fetches
// complete with an abort.
func (c *Control) StopDev(ctx context.Context, id int) error {
	_, err := c.do(ctx, "stop", cmdStopDev, ctrlCmd{devID: uint32(id), queueID: noQueue}, nil)
	return err
}

// DelDev deletes the device (DEL_DEV); the kernel waits until its
// character device is closed.
func (c *Control) DelDev(ctx context.Context, id int) error {
	_, err := c.do(ctx, "delete", cmdDelDev, ctrlCmd{devID: uint32(id), queueID: noQueue}, nil)
	return err
}

// StartUserRecovery prepares a device whose server died for a new one.
// It fails with ErrBusy until the old server's files are released and
// the kernel has quiesced the device.
func (c *Control) StartUserRecovery(ctx context.Context, id int) error {
	_, err := c.do(ctx, "start-recovery", cmdStartUserRecovery, ctrlCmd{devID: uint32(id), queueID: noQueue}, nil)
	return err
}

// EndUserRecovery hands the device to the new server, whose queues must
// have fetched their requests; held I/O then resumes.
func (c *Control) EndUserRecovery(ctx context.Context, id, pid int) error {
	_, err := c.do(ctx, "end-recovery", cmdEndUserRecovery, ctrlCmd{devID: uint32(id), queueID: noQueue, data: [2]uint64{uint64(pid)}}, nil)
	return err
}

// UpdateSize changes the size of a live device to sectors of 512 bytes
// (UPDATE_SIZE); the kernel tells the block layer and udev. It fails
// with ErrNoResize when the kernel lacks FeatureUpdateSize.
func (c *Control) UpdateSize(ctx context.Context, id int, sectors uint64) error {
	if c.features&FeatureUpdateSize == 0 || !c.encoded {
		return &OpError{Op: "update-size", DevID: id, Err: ErrNoResize}
	}
	_, err := c.do(ctx, "update-size", cmdUpdateSize, ctrlCmd{devID: uint32(id), queueID: noQueue, data: [2]uint64{sectors}}, nil)
	return err
}
