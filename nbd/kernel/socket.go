package kernel

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// socketPair is one connection between the kernel and the server: the
// kernel end is handed over by descriptor number, the server end is
// served in this process.
type socketPair struct {
	kernel int // -1 once closed
	server int // -1 once turned into a net.Conn or closed
}

// newSocketPairs makes n Unix stream socketpairs. Both ends are blocking
// (the kernel reads its end with blocking calls; Go makes its own copy of
// the server end non-blocking).
func newSocketPairs(n int) ([]socketPair, error) {
	pairs := make([]socketPair, 0, n)
	for range n {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			closePairs(pairs)
			return nil, fmt.Errorf("socketpair: %w", err)
		}
		pairs = append(pairs, socketPair{kernel: fds[0], server: fds[1]})
	}
	return pairs, nil
}

func kernelEnds(pairs []socketPair) []int {
	fds := make([]int, len(pairs))
	for i, p := range pairs {
		fds[i] = p.kernel
	}
	return fds
}

// closeKernelEnds closes this process's copies of the kernel ends; the
// kernel keeps its own references to the ones it took.
func closeKernelEnds(pairs []socketPair) {
	for i := range pairs {
		if pairs[i].kernel >= 0 {
			unix.Close(pairs[i].kernel)
			pairs[i].kernel = -1
		}
	}
}

func closePairs(pairs []socketPair) {
	closeKernelEnds(pairs)
	for i := range pairs {
		if pairs[i].server >= 0 {
			unix.Close(pairs[i].server)
			pairs[i].server = -1
		}
	}
}

// peerGone reports whether the other end of the server socket is closed.
// Called after closeKernelEnds, it tells whether the kernel kept that
// socket: if it did not, this process held the last reference and the
// close hung the server end up at once.
func (p socketPair) peerGone() (bool, error) {
	fds := []unix.PollFd{{Fd: int32(p.server), Events: unix.POLLRDHUP}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("poll: %w", err)
		}
		return n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLRDHUP) != 0, nil
	}
}

// serverConn turns the server end into a net.Conn (which has its own
// descriptor) and closes the original descriptor.
func (p *socketPair) serverConn() (net.Conn, error) {
	f := os.NewFile(uintptr(p.server), "nbd-server")
	p.server = -1
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("server end: %w", err)
	}
	return c, nil
}
