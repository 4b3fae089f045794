package rawsock

import (
	"os"
	"syscall"
)

// Writer writes to a socket with raw system calls. One goroutine writes
// at a time.
type Writer struct {
	rc    syscall.RawConn
	fnv   func(fd uintptr) bool // w.writeVec, bound once
	n     int                   // bytes written by the current call
	errno syscall.Errno
	all   [][]byte // what writev was given, kept for its capacity
	vec   [][]byte // what of it is left to send
	iov   []iovec
}

// NewWriter writes to rc.
func NewWriter(rc syscall.RawConn) *Writer {
	w := &Writer{rc: rc}
	w.fnv = w.writeVec
	return w
}

// maxIovecs is how many slices one writev takes (IOV_MAX on Linux).
const maxIovecs = 1024

// Writev writes head and then the slices of vec, with as few system
// calls as the socket's buffer allows, waiting in the runtime poller
// whenever that buffer is full. It does not change vec.
func (w *Writer) Writev(head []byte, vec [][]byte) error {
	w.all = append(w.all[:0], head)
	w.all = append(w.all, vec...)
	_, err := w.send("writev")
	return err
}

// Write writes all of p, waiting in the runtime poller whenever the
// socket's buffer is full.
func (w *Writer) Write(p []byte) (int, error) {
	w.all = append(w.all[:0], p)
	return w.send("write")
}

// send writes the slices of w.all and forgets them; it returns how many
// bytes went out.
func (w *Writer) send(call string) (int, error) {
	w.vec, w.n, w.errno = w.all, 0, 0
	err := w.rc.Write(w.fnv)
	clear(w.all)
	clear(w.iov)
	w.all, w.vec, w.iov = w.all[:0], nil, w.iov[:0]
	if err == nil && w.errno != 0 {
		err = os.NewSyscallError(call, w.errno)
	}
	return w.n, err
}

// writeVec is the RawConn callback of Writev: false means wait until
// writable.
func (w *Writer) writeVec(fd uintptr) bool {
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
			w.n += n
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
