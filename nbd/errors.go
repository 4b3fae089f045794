package nbd

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// Errno is an error value of the NBD protocol, sent to the client in the
// error field of a reply. Backends may return one (possibly wrapped) to
// choose exactly what the client sees; other errors are mapped by ErrnoOf.
type Errno uint32

// The error values the protocol defines.
const (
	ErrPerm     Errno = 1   // NBD_EPERM
	ErrIO       Errno = 5   // NBD_EIO
	ErrNoMem    Errno = 12  // NBD_ENOMEM
	ErrInvalid  Errno = 22  // NBD_EINVAL
	ErrNoSpace  Errno = 28  // NBD_ENOSPC
	ErrOverflow Errno = 75  // NBD_EOVERFLOW
	ErrNotSup   Errno = 95  // NBD_ENOTSUP
	ErrShutdown Errno = 108 // NBD_ESHUTDOWN
)

func (e Errno) Error() string {
	switch e {
	case ErrPerm:
		return "nbd: operation not permitted"
	case ErrIO:
		return "nbd: input/output error"
	case ErrNoMem:
		return "nbd: cannot allocate memory"
	case ErrInvalid:
		return "nbd: invalid argument"
	case ErrNoSpace:
		return "nbd: no space left on device"
	case ErrOverflow:
		return "nbd: value too large"
	case ErrNotSup:
		return "nbd: operation not supported"
	case ErrShutdown:
		return "nbd: server is shutting down"
	}
	return fmt.Sprintf("nbd: error %d", uint32(e))
}

// ErrFastZeroUnsupported is returned by a Zeroer asked for a fast zero
// (ZeroFast) that it cannot do faster than writing zeroes. The client sees
// NBD_ENOTSUP, and the export must be left unchanged.
var ErrFastZeroUnsupported = fmt.Errorf("fast zero not possible: %w", ErrNotSup)

// ErrnoOf maps an error from a backend to the value sent to the client:
// an Errno found with errors.As is used as is; system errors are mapped as
// the protocol asks (EDQUOT and EFBIG become NBD_ENOSPC, EROFS NBD_EPERM);
// a request cancelled because its connection or the server is going away
// (context.Canceled) is NBD_ESHUTDOWN; everything else, a backend's own
// timeout (context.DeadlineExceeded) included, is NBD_EIO. A nil error
// gives 0.
func ErrnoOf(err error) Errno {
	if err == nil {
		return 0
	}
	var e Errno
	if errors.As(err, &e) && e != 0 {
		return e
	}
	var se syscall.Errno
	if errors.As(err, &se) {
		switch se {
		case syscall.EPERM, syscall.EACCES, syscall.EROFS:
			return ErrPerm
		case syscall.ENOMEM:
			return ErrNoMem
		case syscall.EINVAL:
			return ErrInvalid
		case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
			return ErrNoSpace
		case syscall.EOVERFLOW:
			return ErrOverflow
		case syscall.EOPNOTSUPP:
			return ErrNotSup
		case syscall.ESHUTDOWN:
			return ErrShutdown
		}
		return ErrIO
	}
	if errors.Is(err, context.Canceled) {
		return ErrShutdown
	}
	return ErrIO
}

// ProtocolError reports a peer that broke a mandatory rule of the protocol;
// the server drops such a connection because the stream cannot be trusted.
type ProtocolError struct {
	Phase  string // "handshake" or "transmission"
	Detail string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("nbd %s: protocol violation: %s", e.Phase, e.Detail)
}

func handshakeViolation(format string, args ...any) error {
	return &ProtocolError{Phase: "handshake", Detail: fmt.Sprintf(format, args...)}
}

func transmissionViolation(format string, args ...any) error {
	return &ProtocolError{Phase: "transmission", Detail: fmt.Sprintf(format, args...)}
}

// ErrServerClosed is returned by Serve and friends after Shutdown or Close.
var ErrServerClosed = errors.New("nbd: server closed")
