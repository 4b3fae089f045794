package rawsock

import (
	"io"
	"os"
	"runtime"
	"syscall"
	"time"
)

// Reader reads from a socket with raw system calls. One goroutine reads
// at a time.
type Reader struct {
	rc    syscall.RawConn
	fn    func(fd uintptr) bool // r.read, bound once: a read allocates nothing
	p     []byte
	n     int
	errno syscall.Errno
	// poll: a read polls the empty socket before it waits (NewReader).
	// spin is how long a read polls now (0 or MaxSpin); misses counts
	// the reads in a row that polled in vain. parkedAt is when the
	// current read gave up polling and waited (zero if it has not).
	poll     bool
	spin     time.Duration
	misses   int
	parkedAt time.Time
}

// Polling. A client at a low queue depth sends its next request within
// tens of microseconds of a reply, and parking the reading goroutine in
// the runtime poller for that gap costs more than the gap: its thread
// sleeps, and the poller's wake-up and the scheduler's hand-off come on
// top of the wait. So a polling Reader first polls the socket, yielding
// to other goroutines between tries, for up to MaxSpin. A connection
// whose reads polled in vain MaxMisses times in a row stops polling until
// a read again gets data within MaxSpin of a wait's start, so an idle or
// slow peer costs at most MaxMisses polls. Polling pays at low queue
// depths against a backend in memory; where the backend is remote and
// shares the machine's cores (an RBD export), the polls take CPU the
// backend needs, so the NBD server polls only for exports it serves
// inline (in memory).
const (
	MaxSpin   = 50 * time.Microsecond
	MaxMisses = 8
)

// NewReader reads from rc; with poll, reads poll an empty socket for up
// to MaxSpin before they wait in the runtime poller.
func NewReader(rc syscall.RawConn, poll bool) *Reader {
	r := &Reader{rc: rc}
	r.SetPoll(poll)
	r.fn = r.read
	return r
}

// SetPoll turns polling on or off for the reads that follow; only the
// reading goroutine may call it, between reads. Polling pays when the
// peer's next bytes come within microseconds (a client of a backend in
// memory); when they come at the pace of a remote backend, the polls take
// CPU from whatever else runs on the machine.
func (r *Reader) SetPoll(poll bool) {
	r.poll, r.misses = poll, 0
	r.spin = 0
	if poll {
		r.spin = MaxSpin
	}
}

// adapt sets the polling window after a read that waited in the poller
// for waited.
func (r *Reader) adapt(waited time.Duration) {
	if !r.poll {
		return
	}
	if r.spin == 0 {
		if waited <= MaxSpin {
			r.spin, r.misses = MaxSpin, 0
		}
		return
	}
	if r.misses++; r.misses >= MaxMisses {
		r.spin = 0
	}
}

// Read reads at least one byte into p, waiting in the runtime poller until
// the socket has some.
func (r *Reader) Read(p []byte) (int, error) {
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
func (r *Reader) read(fd uintptr) bool {
	var polling time.Time
	for {
		n, errno := sysRead(fd, r.p)
		switch errno {
		case 0:
			r.n = n
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			if !r.poll {
				return false
			}
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
