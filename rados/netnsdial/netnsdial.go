// Package netnsdial opens TCP connections from inside another network
// namespace than the process's: a socket belongs to the namespace of the
// thread that created it, so Dialer's connections are made on a thread
// moved into the namespace for the socket's creation and moved back
// after. This is how a node plugin in the host's network namespace
// reaches a Ceph cluster that only a pod network (Multus) can reach,
// which ceph-csi's netNamespaceFilePath names. It needs CAP_SYS_ADMIN.
package netnsdial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Dialer makes connections inside the network namespace of a file:
// /proc/PID/ns/net, or a bind mount of one such as /run/netns/NAME.
type Dialer struct {
	path string
	ns   *os.File
}

// Open opens the namespace file path and checks it is a network
// namespace. Close releases it.
func Open(path string) (*Dialer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("netnsdial: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("netnsdial: %s: %w", path, err)
	}
	if st.Type != unix.NSFS_MAGIC {
		f.Close()
		return nil, fmt.Errorf("netnsdial: %s is not a namespace file (file system type %#x)", path, st.Type)
	}
	// NS_GET_NSTYPE tells which kind of namespace it is
	typ, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
	if err == nil && typ != unix.CLONE_NEWNET {
		f.Close()
		return nil, fmt.Errorf("netnsdial: %s is not a network namespace (type %#x)", path, typ)
	}
	return &Dialer{path: path, ns: f}, nil
}

// Path is the namespace file the Dialer was opened with.
func (d *Dialer) Path() string { return d.path }

// Current reports whether Path still names the namespace the Dialer
// holds: a pod recreated behind a bind-mounted path brings a new one.
func (d *Dialer) Current() bool {
	var held, now unix.Stat_t
	if unix.Fstat(int(d.ns.Fd()), &held) != nil || unix.Stat(d.path, &now) != nil {
		return false
	}
	return held.Dev == now.Dev && held.Ino == now.Ino
}

// Close releases the namespace file.
func (d *Dialer) Close() error { return d.ns.Close() }

// DialContext connects to address inside the namespace, as
// net.Dialer.DialContext does in the process's own.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	// A goroutine of its own, locked to its thread: if the thread could
	// not be moved back, the goroutine ends still locked and the runtime
	// retires the thread instead of running other goroutines in the
	// wrong namespace.
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("netnsdial: the thread's own namespace: %w", err)}
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(d.ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("netnsdial: entering %s: %w", d.path, err)}
			return
		}
		var nd net.Dialer
		c, err := nd.DialContext(ctx, network, address)
		if rerr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); rerr != nil {
			// stay locked: this thread dies with the goroutine
			if c != nil {
				c.Close()
			}
			done <- result{err: errors.Join(err, fmt.Errorf("netnsdial: leaving %s: %w", d.path, rerr))}
			return
		}
		runtime.UnlockOSThread()
		if err != nil {
			err = fmt.Errorf("netnsdial: in %s: %w", d.path, err)
		}
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}
