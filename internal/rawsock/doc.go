// Package rawsock reads and writes stream sockets with raw system calls
// on their non-blocking file descriptors, for the NBD server and the Ceph
// messenger.
//
// The reads and writes run through the socket's syscall.RawConn, so the
// runtime poller still does all the waiting (and deadlines and Close
// still interrupt it), but no call enters the runtime's syscall state.
// Entering it costs twice over. A process that was idle wakes the
// runtime's monitor thread (sysmon), which then polls until it is idle
// again: a server that answers one request at a time goes idle between
// every two, and pays for those wake-ups and context switches on every
// request. And a call that stays in the kernel for a while (copying a
// 4 MiB message into a socket or out of one) has its P taken away by
// sysmon and handed to another thread, which the call must win back
// when it returns. A call on a non-blocking socket returns at once,
// which is what a raw system call needs: it never sleeps in the kernel.
//
// A Splicer (Linux) sends a buffer by reference instead: vmsplice maps
// its pages into a pipe and splice moves them into the socket, so the
// kernel copies them once, into the reader, rather than into the socket
// first. The messenger sends large OSD write data that way when the
// client asks for it (rados.Config.SpliceWrites): whether it pays
// depends on the CPU (see osdc.Config.SpliceWrites).
//
// Only Unix and TCP connections on Linux qualify (Of); everything else
// keeps using net.Conn. Under the race detector the calls go through the
// syscall package, whose annotations order a write to a socket before
// the read of those bytes as net.Conn does.
package rawsock

import (
	"net"
	"syscall"
)

// Of returns the RawConn of c when its reads and writes can be raw system
// calls, and nil otherwise.
func Of(c net.Conn) syscall.RawConn {
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
