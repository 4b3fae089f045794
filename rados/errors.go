package rados

import (
	"syscall"

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
)

// ErrPoolNotFound is returned for a pool that does not exist.
var ErrPoolNotFound = osdc.ErrPoolNotFound

// ErrClosed is returned by calls on a closed Conn.
var ErrClosed = osdc.ErrClosed

// Errno is the error number an OSD returned; errors.As finds it in the
// errors of object operations.
type Errno = osdc.Errno

// OpError is an object operation an OSD refused: which request, which of
// its operations, and the errno.
type OpError = osdc.OpError
