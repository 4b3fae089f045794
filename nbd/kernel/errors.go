package kernel

import (
	"errors"
	"fmt"
)

var (
	// ErrNotLoaded means the kernel has no nbd generic netlink family:
	// nbd.ko is not loaded (LoadModule loads it).
	ErrNotLoaded = errors.New("nbd kernel module not loaded (no generic netlink family \"nbd\")")

	// ErrReattachUnsupported means the kernel predates backend cookies
	// (Linux 5.14): its devices cannot be found again by cookie, so they
	// cannot be reattached safely.
	ErrReattachUnsupported = errors.New("kernel nbd driver has no backend identifier (needs Linux 5.14+): reattach unsupported")

	// ErrNoSuchDevice means no nbd device carries the cookie asked for.
	ErrNoSuchDevice = errors.New("no nbd device with this backend cookie")

	// ErrCookieMismatch means the device carries another cookie.
	ErrCookieMismatch = errors.New("nbd device carries another backend cookie")

	// ErrCookieInUse means a configured device already carries the cookie
	// given to Attach: reattach it instead.
	ErrCookieInUse = errors.New("backend cookie already used by an nbd device")

	// ErrNotConnected means the device has no configuration to reattach to
	// (it was disconnected, or its dead connection timeout ran out).
	ErrNotConnected = errors.New("nbd device is not configured")

	// ErrNoDeadConnection means the kernel took none of the sockets offered
	// by a reattach: it replaces only dead connections, so another server
	// still serves the device.
	ErrNoDeadConnection = errors.New("nbd device has no dead connection to replace (is its old server still running?)")

	// ErrNotificationsLost means the kernel dropped link notifications
	// before LinkWatcher read them (its socket's buffer was full).
	ErrNotificationsLost = errors.New("nbd link notifications lost")
)

// OpError is a failed netlink command on a device. It unwraps to the
// netlink error, which unwraps to its errno.
type OpError struct {
	Op    string // connect, reconfigure, disconnect, status
	Index int    // AnyIndex when none
	Err   error
}

func (e *OpError) Error() string {
	if e.Index == AnyIndex {
		return fmt.Sprintf("nbd %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("nbd %s /dev/nbd%d: %v", e.Op, e.Index, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// CookieError is ErrCookieMismatch or ErrCookieInUse with the details.
type CookieError struct {
	Err   error // ErrCookieMismatch or ErrCookieInUse
	Index int
	Want  string // the cookie asked for
	Have  string // the cookie the device carries
}

func (e *CookieError) Error() string {
	if errors.Is(e.Err, ErrCookieMismatch) {
		return fmt.Sprintf("/dev/nbd%d: %v: want %q, device has %q", e.Index, e.Err, e.Want, e.Have)
	}
	return fmt.Sprintf("/dev/nbd%d: %v: %q", e.Index, e.Err, e.Want)
}

func (e *CookieError) Unwrap() error { return e.Err }
