package main

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
	"github.com/purerbd/purerbd/rbd/diffstream"
)

// rbdFailure reports a verb's failure as the rbd tool does ("rbd: diff
// error: ...") and exits with the errno rbd would (its exit status is
// the negated return code of the failed call): scripts test for 2 (no
// such image or snapshot) and 22.
func rbdFailure(stderr io.Writer, verb string, err error) error {
	fmt.Fprintf(stderr, "rbd: %s error: %v\n", verb, err)
	return cli.ExitStatus(errnoOf(err))
}

// errnoOf is the errno librbd would have returned for err, 1 when
// there is none to tell.
func errnoOf(err error) int {
	for _, m := range []struct {
		err   error
		errno syscall.Errno
	}{
		{rbd.ErrNotFound, syscall.ENOENT},
		{rados.ErrPoolNotFound, syscall.ENOENT},
		{rbd.ErrExists, syscall.EEXIST},
		{rbd.ErrInvalid, syscall.EINVAL},
		{rbd.ErrReadOnly, syscall.EROFS},
		{rbd.ErrBusy, syscall.EBUSY},
		{rbd.ErrUnsupportedFeature, syscall.ENOSYS},
		{diffstream.ErrFormat, syscall.EINVAL},
	} {
		if errors.Is(err, m.err) {
			return int(m.errno)
		}
	}
	var e syscall.Errno
	if errors.As(err, &e) && e != 0 {
		return int(e)
	}
	var oe rados.Errno
	if errors.As(err, &oe) && oe > 0 {
		return int(oe)
	}
	// errors that match an errno without being one (a mon command's)
	for n := syscall.Errno(1); n < 134; n++ {
		if errors.Is(err, n) {
			return int(n)
		}
	}
	return 1
}
