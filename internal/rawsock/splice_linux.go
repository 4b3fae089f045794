//go:build linux

package rawsock

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Splicer hands memory to a socket by reference instead of copying it:
// vmsplice(2) maps the pages into a pipe, splice(2) moves them from the
// pipe into the socket's queue, and the kernel copies them only once,
// into the reader's buffer (on loopback, the peer's recv). Until the
// peer has read those bytes the kernel refers to the caller's memory:
// what the caller changes in that time is what the peer reads.
//
// A Splicer is a pipe; it serves one Writer at a time.
type Splicer struct {
	r, w    int
	size    int // the pipe's capacity
	pending int // bytes in the pipe, not yet in the socket
	p       []byte
	err     error
}

// pipeSize is the capacity asked for the pipe: each vmsplice maps at most
// this much (1 MiB is what an unprivileged process may ask for by
// default, /proc/sys/fs/pipe-max-size).
const pipeSize = 1 << 20

// NewSplicer makes a Splicer, or fails where the kernel offers no pipes.
func NewSplicer() (*Splicer, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, fmt.Errorf("rawsock: pipe: %w", err)
	}
	s := &Splicer{r: p[0], w: p[1]}
	size, err := unix.FcntlInt(uintptr(s.w), unix.F_SETPIPE_SZ, pipeSize)
	if err != nil {
		size, err = unix.FcntlInt(uintptr(s.w), unix.F_GETPIPE_SZ, 0)
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("rawsock: pipe size: %w", err)
	}
	s.size = size
	return s, nil
}

// Close releases the pipe (and any pages still in it).
func (s *Splicer) Close() error {
	return errors.Join(unix.Close(s.r), unix.Close(s.w))
}

// buffered is how many bytes the pipe holds that are not in the socket.
func (s *Splicer) buffered() int { return s.pending }

// Splice sends all of p through s, waiting in the runtime poller whenever
// the socket's buffer is full. p's memory must stay unchanged until the
// peer has read it. After an error the Splicer may hold some of p: it
// must be closed, as the connection must.
func (w *Writer) Splice(s *Splicer, p []byte) error {
	s.p, s.err = p, nil
	err := w.rc.Write(s.move)
	s.p = nil
	if err == nil {
		err = s.err
	}
	return err
}

// move is the RawConn callback of Splice: false means wait until the
// socket is writable.
func (s *Splicer) move(fd uintptr) bool {
	for len(s.p) > 0 || s.pending > 0 {
		if s.pending == 0 {
			// the pipe is empty: map the next piece of p into it (a
			// piece spanning more pages than the pipe has slots is
			// mapped in part)
			iov := []unix.Iovec{{Base: &s.p[0]}}
			iov[0].SetLen(min(len(s.p), s.size))
			n, err := unix.Vmsplice(s.w, iov, 0)
			switch {
			case err == syscall.EINTR:
				continue
			case err != nil:
				s.err = os.NewSyscallError("vmsplice", err)
				return true
			}
			s.pending += n
			s.p = s.p[n:]
		}
		n, err := unix.Splice(s.r, nil, int(fd), nil, s.pending, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		switch {
		case err == syscall.EINTR:
		case err == syscall.EAGAIN:
			return false
		case err != nil:
			s.err = os.NewSyscallError("splice", err)
			return true
		case n <= 0:
			s.err = fmt.Errorf("splice: %w", io.ErrShortWrite)
			return true
		default:
			s.pending -= int(n)
		}
	}
	return true
}
