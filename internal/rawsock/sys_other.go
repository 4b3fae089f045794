//go:build !linux

package rawsock

import "syscall"

// rawSyscalls: sockets go through net.Conn here.
const rawSyscalls = false

func sysRead(uintptr, []byte) (int, syscall.Errno)    { return 0, syscall.ENOSYS }
func sysWritev(uintptr, []iovec) (int, syscall.Errno) { return 0, syscall.ENOSYS }
