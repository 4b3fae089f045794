package guestbench

import (
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawFile reads and writes a block device with raw pread(2) and
// pwrite(2): the calling goroutine's thread waits in the kernel holding
// its P, with none of the runtime's system call bookkeeping, as the one
// thread of a C program doing synchronous I/O does.
//
// The load runs its depth-1 cases this way. Through the runtime's
// system call path every blocking call of a program that has nothing
// else to run lets the runtime's monitor thread (sysmon) wake and poll,
// so the guest program ran a second thread of its own for every
// request. Under TCG that thread trades vCPUs with a userspace server,
// and each trade flushes the emulator's software TLB: the load charged
// the userspace paths for a thread that a C application does not have,
// and krbd, which has no server to trade with, hardly at all.
// Deeper cases keep their requests in flight from one goroutine through
// Linux AIO (aio.go), for the same reason.
type rawFile struct{ f *os.File }

func (r rawFile) ReadAt(p []byte, off int64) (int, error) {
	return r.rw(unix.SYS_PREAD64, p, off)
}

func (r rawFile) WriteAt(p []byte, off int64) (int, error) {
	return r.rw(unix.SYS_PWRITE64, p, off)
}

func (r rawFile) Close() error { return r.f.Close() }

// rw transfers all of p at off, as io.ReaderAt and io.WriterAt must.
func (r rawFile) rw(trap uintptr, p []byte, off int64) (int, error) {
	fd := r.f.Fd()
	done := 0
	for done < len(p) {
		q := p[done:]
		n, _, errno := unix.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(unsafe.SliceData(q))), uintptr(len(q)), uintptr(off+int64(done)), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return done, &os.PathError{Op: opName(trap), Path: r.f.Name(), Err: errno}
		}
		if n == 0 {
			if trap == unix.SYS_PREAD64 {
				return done, io.EOF
			}
			return done, &os.PathError{Op: opName(trap), Path: r.f.Name(), Err: io.ErrShortWrite}
		}
		done += int(n)
	}
	return done, nil
}

func opName(trap uintptr) string {
	if trap == unix.SYS_PREAD64 {
		return "pread"
	}
	return "pwrite"
}
