package osdc

import (
	"errors"
	"fmt"
	"syscall"
)

// Errno is an error number an OSD returned (positive, Linux numbering,
// which is what Ceph puts on the wire). It matches the syscall.Errno of
// the same number with errors.Is, so errors.Is(err, syscall.ENOENT)
// works.
type Errno int32

// Error returns the errno's text ("no such file or directory").
func (e Errno) Error() string { return syscall.Errno(e).Error() }

// Is matches syscall.Errno values with the same number.
func (e Errno) Is(target error) bool {
	t, ok := target.(syscall.Errno)
	return ok && int32(t) == int32(e)
}

// Error numbers the objecter and its callers tell apart.
const (
	ENOENT     Errno = 2
	EIO        Errno = 5
	EAGAIN     Errno = 11
	EACCES     Errno = 13
	EPERM      Errno = 1
	EEXIST     Errno = 17
	EINVAL     Errno = 22
	ENOSPC     Errno = 28
	ERANGE     Errno = 34
	ENODATA    Errno = 61
	ETIMEDOUT  Errno = 110
	ENOTCONN   Errno = 107
	ECANCELED  Errno = 125
	EOPNOTSUPP Errno = 95
	EOVERFLOW  Errno = 75
	EDQUOT     Errno = 122
	EBLOCKLIST Errno = 108 // EBLOCKLISTED (ESHUTDOWN)
	EOLDSNAPC  Errno = 85
)

// OpError is a request that an OSD answered with an error.
type OpError struct {
	Op     string // what was attempted, e.g. "read rbd_header.1234"
	Errno  Errno
	OpIdx  int // the failing operation's index in the request, or -1
	Offset int64
}

func (e *OpError) Error() string {
	if e.OpIdx >= 0 {
		return fmt.Sprintf("osdc: %s: op %d: %v", e.Op, e.OpIdx, e.Errno)
	}
	return fmt.Sprintf("osdc: %s: %v", e.Op, e.Errno)
}

// Unwrap returns the Errno.
func (e *OpError) Unwrap() error { return e.Errno }

// ErrPoolNotFound is returned for requests to a pool the OSD map does not
// have (also after asking the monitors for a newer map). It also matches
// syscall.ENOENT with errors.Is.
var ErrPoolNotFound error = poolNotFound{}

type poolNotFound struct{}

func (poolNotFound) Error() string        { return "osdc: pool does not exist" }
func (poolNotFound) Is(target error) bool { return target == syscall.ENOENT }

// ErrPoolEIO is returned for requests to a pool flagged EIO.
var ErrPoolEIO = errors.New("osdc: pool is marked EIO")

// ErrClosed is returned by calls on a closed Objecter.
var ErrClosed = errors.New("osdc: objecter closed")

// errnoOf turns a negative result into an Errno (0 for success).
func errnoOf(result int32) Errno {
	if result >= 0 {
		return 0
	}
	return Errno(-result)
}
