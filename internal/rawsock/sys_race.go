//go:build linux && race

package rawsock

import (
	"syscall"
	"unsafe"
)

// rawSyscalls: sockets are read and written through their RawConn, as
// without the race detector, but with the syscall package's wrappers,
// whose race annotations order a write to a socket before the read of
// those bytes, as net.Conn does; raw system calls have none, and the
// detector would report the client's and the server's accesses around
// one request as races.
const rawSyscalls = true

func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errnoOf(err)
}

// sysWritev writes the slices one by one, through syscall.Write for its
// race annotations.
func sysWritev(fd uintptr, iov []iovec) (int, syscall.Errno) {
	total := 0
	for _, v := range iov {
		n, errno := sysWrite(fd, unsafe.Slice(v.Base, v.Len))
		total += n
		if errno != 0 || n < int(v.Len) {
			if total > 0 {
				return total, 0
			}
			return 0, errno
		}
	}
	return total, 0
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return err.(syscall.Errno)
}
