package ublk

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

var (
	// ErrUnsupported means this kernel has no ublk: no ublk_drv module
	// to load and no /dev/ublk-control, or no io_uring with 128-byte
	// SQEs (Linux 5.19+) to talk to it.
	ErrUnsupported = errors.New("ublk unsupported by this kernel")

	// ErrBusy means the kernel refused a command because the device is
	// in use or in the wrong state for it: START_USER_RECOVERY while the
	// old server still holds the device, SET_PARAMS on a started one.
	ErrBusy = errors.New("ublk device busy")

	// ErrNoDevice means there is no ublk device with the id given.
	ErrNoDevice = errors.New("no such ublk device")

	// ErrNoRecovery means the device was added without user recovery,
	// so no new server can take it over.
	ErrNoRecovery = errors.New("ublk device has no user recovery")

	// ErrNoResize: the kernel cannot change a live device's size
	// (UPDATE_SIZE came with Linux 6.16).
	ErrNoResize = errors.New("this kernel cannot resize a live ublk device (Linux 6.16 or later can)")
)

// OpError is a control command the kernel failed. It unwraps to the
// errno and, where one applies, to ErrBusy or ErrNoDevice.
type OpError struct {
	Op    string // add, set-params, start, stop, delete, info, start-recovery, end-recovery, update-size
	DevID int    // -1 when none
	Err   error
}

func (e *OpError) Error() string {
	if e.DevID < 0 {
		return fmt.Sprintf("ublk %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("ublk %s of device %d: %v", e.Op, e.DevID, e.Err)
}

// Unwrap returns the errno and the sentinel it stands for.
func (e *OpError) Unwrap() []error {
	errs := []error{e.Err}
	switch {
	case errors.Is(e.Err, unix.EBUSY):
		errs = append(errs, ErrBusy)
	case errors.Is(e.Err, unix.ENODEV):
		errs = append(errs, ErrNoDevice)
	}
	return errs
}
