//go:build linux && !race

package rawsock

import (
	"syscall"
	"unsafe"
)

// rawSyscalls: sockets are read and written with raw system calls.
const rawSyscalls = true

// sysRead is read(2) without the runtime's syscall bookkeeping; fd must be
// non-blocking.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(n), errno
}

// sysWritev is writev(2) without the runtime's syscall bookkeeping; fd
// must be non-blocking.
func sysWritev(fd uintptr, iov []iovec) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)))
	return int(n), errno
}
