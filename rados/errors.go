package rados

import (
	"syscall"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/monc"
	"github.com/purerbd/purerbd/rados/msgr"
	"github.com/purerbd/purerbd/rados/osdc"
)

// Errors that callers tell apart, matched with errors.Is. They are the
// errno values OSDs and monitors return: errors.Is(err, ErrNotFound) holds
// for an object, a pool, an xattr key or a monitor command that found
// nothing.
var (
	ErrNotFound         error = syscall.ENOENT
	ErrExists           error = syscall.EEXIST
	ErrPermissionDenied error = syscall.EPERM
	ErrAccessDenied     error = syscall.EACCES
	ErrNoData           error = syscall.ENODATA   // a missing xattr
	ErrCanceled         error = syscall.ECANCELED // a failed comparison (CmpXattr)
	ErrRange            error = syscall.ERANGE    // AssertVersion: the object is older
	ErrOverflow         error = syscall.EOVERFLOW // AssertVersion: the object is newer
	ErrTimedOut         error = syscall.ETIMEDOUT // e.g. watchers that did not answer a notify
	ErrNotConnected     error = syscall.ENOTCONN  // a lost watch
	ErrInvalid          error = syscall.EINVAL
	ErrNoSpace          error = syscall.ENOSPC
	ErrQuota            error = syscall.EDQUOT
	ErrBusy             error = syscall.EBUSY // an advisory lock another locker holds
)

// ErrPoolNotFound is returned for a pool that does not exist.
var ErrPoolNotFound = osdc.ErrPoolNotFound

// ErrClosed is returned by calls on a closed Conn.
var ErrClosed = osdc.ErrClosed

// Errors of connecting, matched with errors.Is (ErrAuthFailed,
// ErrModeRefused) or errors.As (*HuntError). Connect returns them, and so
// does any call that needs a new monitor session later.
var (
	// ErrAuthFailed is wrapped by every error that means the cluster
	// refused the credentials: a wrong key, an unknown or disabled
	// entity. Retrying does not help.
	ErrAuthFailed = auth.ErrAuthFailed
	// ErrModeRefused means a monitor or an OSD allows none of the
	// connection modes asked for (Config.MonMode, Config.Mode).
	ErrModeRefused = msgr.ErrModeRefused
)

// HuntError reports that no monitor session could be established: every
// monitor address tried and why each failed. errors.Is sees through it
// to the failures, so an ErrAuthFailed or a context deadline among them
// is still found.
type HuntError = monc.HuntError

// Errno is the error number an OSD returned; errors.As finds it in the
// errors of object operations.
type Errno = osdc.Errno

// OpError is an object operation an OSD refused: which request, which of
// its operations, and the errno.
type OpError = osdc.OpError
