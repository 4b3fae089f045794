package nbd

import (
	"io"
	"net"
	"os"
	"syscall"
)

// A connection's socket I/O, on Linux, bypasses net.Conn: reads and writes
// are raw system calls on the non-blocking socket, run through its
// syscall.RawConn, so the runtime poller still does all the waiting (and
// deadlines and Close still interrupt it) but no call enters the runtime's
// syscall state. Entering it (entersyscall) wakes the runtime's monitor
// thread (sysmon) whenever the process was idle before, and a server that
// answers one request at a time goes idle between every two: each request
// then paid for a futex wake-up of that thread, its 20 µs sleeps until the
// process was idle again and the context switches, about a quarter of the
// server's CPU at queue depth 1 in a profile. A call on a non-blocking
// socket returns at once, which is what a raw system call needs.
//
// Other connections (TLS, pipes, other systems) go through net.Conn.

// rawSocket returns the RawConn of c when its reads and writes can be raw
// system calls, and nil otherwise.
func rawSocket(c net.Conn) syscall.RawConn {
	if !rawSyscalls {
		return nil
	}
	switch c.(type) {
	case *net.UnixConn, *net.TCPConn:
	default:
		return nil
	}
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// rawReader reads from a socket with raw system calls. One goroutine
// reads at a time (the session's bufio.Reader is its only caller).
type rawReader struct {
	rc    syscall.RawConn
	fn    func(fd uintptr) bool // r.read, bound once: a read allocates nothing
	p     []byte
	n     int
	errno syscall.Errno
}

func newRawReader(rc syscall.RawConn) *rawReader {
	r := &rawReader{rc: rc}
	r.fn = r.read
	return r
}

// Read reads at least one byte into p, waiting in the runtime poller until
// the socket has some.
func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.errno = p, 0, 0
	err := r.rc.Read(r.fn)
	n, errno := r.n, r.errno
	r.p = nil
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// read is the RawConn callback: false means wait until readable.
func (r *rawReader) read(fd uintptr) bool {
	for {
		n, errno := sysRead(fd, r.p)
		switch errno {
		case 0:
			r.n = n
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			r.errno = errno
			return true
		}
	}
}

// rawWriter writes to a socket with raw system calls. One goroutine
// writes at a time (the session's connWriter is its only caller).
type rawWriter struct {
	rc    syscall.RawConn
	fn    func(fd uintptr) bool // w.write, bound once
	fnv   func(fd uintptr) bool // w.writeVec, bound once
	p     []byte
	n     int
	errno syscall.Errno
	all   [][]byte // what writev was given, kept for its capacity
	vec   [][]byte // what of it is left to send
	iov   []iovec
}

func newRawWriter(rc syscall.RawConn) *rawWriter {
	w := &rawWriter{rc: rc}
	w.fn, w.fnv = w.write, w.writeVec
	return w
}

// maxIovecs is how many slices one writev takes (IOV_MAX on Linux).
const maxIovecs = 1024

// writev writes head and then the slices of vec, with as few system
// calls as the socket's buffer allows.
func (w *rawWriter) writev(head []byte, vec [][]byte) error {
	w.all = append(w.all[:0], head)
	w.all = append(w.all, vec...)
	w.vec, w.errno = w.all, 0
	err := w.rc.Write(w.fnv)
	clear(w.all)
	clear(w.iov)
	w.all, w.vec, w.iov = w.all[:0], nil, w.iov[:0]
	if err == nil && w.errno != 0 {
		err = os.NewSyscallError("writev", w.errno)
	}
	return err
}

// writeVec is the RawConn callback of writev: false means wait until
// writable.
func (w *rawWriter) writeVec(fd uintptr) bool {
	for {
		for len(w.vec) > 0 && len(w.vec[0]) == 0 {
			w.vec = w.vec[1:]
		}
		if len(w.vec) == 0 {
			return true
		}
		w.iov = w.iov[:0]
		for _, b := range w.vec[:min(len(w.vec), maxIovecs)] {
			if len(b) > 0 {
				w.iov = append(w.iov, newIovec(b))
			}
		}
		n, errno := sysWritev(fd, w.iov)
		switch errno {
		case 0:
			for n > 0 {
				k := min(n, len(w.vec[0]))
				w.vec[0] = w.vec[0][k:]
				n -= k
				if len(w.vec[0]) == 0 {
					w.vec = w.vec[1:]
				}
			}
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			w.errno = errno
			return true
		}
	}
}

// Write writes all of p, waiting in the runtime poller whenever the
// socket's buffer is full.
func (w *rawWriter) Write(p []byte) (int, error) {
	w.p, w.n, w.errno = p, 0, 0
	err := w.rc.Write(w.fn)
	n, errno := w.n, w.errno
	w.p = nil
	if err == nil && errno != 0 {
		err = os.NewSyscallError("write", errno)
	}
	return n, err
}

// write is the RawConn callback: false means wait until writable.
func (w *rawWriter) write(fd uintptr) bool {
	for w.n < len(w.p) {
		n, errno := sysWrite(fd, w.p[w.n:])
		switch errno {
		case 0:
			w.n += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			w.errno = errno
			return true
		}
	}
	return true
}
