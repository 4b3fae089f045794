package nbd

import (
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"
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
	// spin is how long a read polls the empty socket before it waits in
	// the runtime poller (0 or maxSpin); misses counts the reads in a
	// row that polled in vain. parkedAt is when the current read gave up
	// polling and waited (zero if it has not).
	spin     time.Duration
	misses   int
	parkedAt time.Time
}

// Polling. A client at a low queue depth sends its next request within
// tens of microseconds of a reply, and parking the reading goroutine in
// the runtime poller for that gap costs more than the gap: its thread
// sleeps, and the poller's wake-up and the scheduler's hand-off come on
// top of the wait. So a read first polls the socket, yielding to other
// goroutines between tries, for up to maxSpin. A connection whose reads
// polled in vain maxMisses times in a row stops polling until a request
// again arrives within maxSpin of a wait's start, so an idle or slow
// client costs at most maxMisses polls. By hand, `purerbd nbd serve
// --memory` under fio 4k random I/O, two rounds: at queue depth 1,
// 34-42k writes/s and 35k reads/s against 14-22k and 15-17k without
// polling (nbdkit: 28k writes/s), at 20-24 against 20-30 µs of CPU per
// request (the bench suite's NBD section: 30 against 24 µs per write);
// at depth 8, 158-163k writes/s and 141-143k reads/s against
// 91k and 93-102k. At depth 32 it moved throughput by -12% to +19% and
// cost about 1 µs more per request; an RBD export at depth 32 stayed at
// 14.7k against 15.1k writes/s (server CPU 34.8 against 33.5 µs each).
const (
	maxSpin   = 50 * time.Microsecond
	maxMisses = 8
)

func newRawReader(rc syscall.RawConn) *rawReader {
	r := &rawReader{rc: rc, spin: maxSpin}
	r.fn = r.read
	return r
}

// adapt sets the polling window after a read that waited in the poller
// for waited.
func (r *rawReader) adapt(waited time.Duration) {
	if r.spin == 0 {
		if waited <= maxSpin {
			r.spin, r.misses = maxSpin, 0
		}
		return
	}
	if r.misses++; r.misses >= maxMisses {
		r.spin = 0
	}
}

// Read reads at least one byte into p, waiting in the runtime poller until
// the socket has some.
func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.errno, r.parkedAt = p, 0, 0, time.Time{}
	err := r.rc.Read(r.fn)
	if !r.parkedAt.IsZero() {
		r.adapt(time.Since(r.parkedAt))
	} else if r.spin > 0 {
		r.misses = 0
	}
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

// read is the RawConn callback: false means wait until readable. The
// first call polls for up to r.spin.
func (r *rawReader) read(fd uintptr) bool {
	var polling time.Time
	for {
		n, errno := sysRead(fd, r.p)
		switch errno {
		case 0:
			r.n = n
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			if !r.parkedAt.IsZero() {
				return false // woken without data
			}
			now := time.Now()
			if polling.IsZero() {
				polling = now
			}
			if now.Sub(polling) >= r.spin {
				r.parkedAt = now
				return false
			}
			runtime.Gosched()
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
