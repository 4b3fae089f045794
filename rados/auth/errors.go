package auth

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/purerbd/purerbd/rados/denc"
)

// ErrAuthFailed is wrapped by every error that means the peer refused our
// credentials or we could not prove them (for example a wrong key). It is
// final: retrying with the same key will not help.
var ErrAuthFailed = errors.New("authentication failed")

// ErrTryAgain is wrapped when the peer refused to authenticate us for
// now, not for good: it answered EBUSY or EAGAIN (a monitor that has not
// formed its first quorum yet, or has no global id to hand out). The
// same credentials may succeed later or with another monitor.
var ErrTryAgain = errors.New("authentication refused for now")

// ErrNoTicket is wrapped when a connection to a service needs a ticket the
// client does not hold (not yet obtained from the monitors, or expired).
// The monitor client should renew tickets and the caller try again.
var ErrNoTicket = errors.New("no valid ticket")

// ErrProtocol is wrapped when a peer's auth message cannot be understood.
var ErrProtocol = errors.New("auth protocol error")

// Error describes an authentication failure for one entity. It never holds
// key material. errors.Is matches it against its Err and, when the peer
// refused with an errno, against that syscall.Errno.
type Error struct {
	Entity denc.AuthName // who we tried to authenticate as
	Peer   string        // the peer type, e.g. "mon" or "osd"
	Reason string        // what went wrong, in words
	// Errno is the errno the peer refused with (EACCES, EPERM, EBUSY...),
	// or 0 when the failure was found on this side.
	Errno syscall.Errno
	Err   error // ErrAuthFailed, ErrTryAgain, ErrNoTicket or ErrProtocol, possibly wrapping more
}

func (e *Error) Error() string {
	return fmt.Sprintf("auth: %s to %s: %s: %v", e.Entity, e.Peer, e.Reason, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the syscall.Errno the peer refused with.
func (e *Error) Is(target error) bool {
	t, ok := target.(syscall.Errno)
	return ok && e.Errno != 0 && t == e.Errno
}

// Refused is the error for a peer's refusal carrying a negative errno
// (the result of AUTH_BAD_METHOD, the status of a cephx reply, the
// result of an MAuthReply): EBUSY and EAGAIN wrap ErrTryAgain, any other
// errno ErrAuthFailed, which is final. reason says what was refused; the
// errno's name is appended.
func Refused(entity denc.AuthName, peer, reason string, result int32) *Error {
	var errno syscall.Errno
	if result < 0 {
		errno = syscall.Errno(-result)
	}
	kind := ErrAuthFailed
	if errno == syscall.EBUSY || errno == syscall.EAGAIN {
		kind = ErrTryAgain
	}
	return &Error{Entity: entity, Peer: peer, Reason: reason + ": " + errnoText(result), Errno: errno, Err: kind}
}
