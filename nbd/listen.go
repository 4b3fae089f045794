package nbd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
)

// ListenUnix listens on a Unix socket at path that only perm allows to
// connect (0 means 0600). The socket is bound in a private directory,
// given its mode, then renamed into place, so it is never reachable with
// looser permissions. A stale socket at path is replaced; any other file
// there is an error. Closing the listener removes the socket.
func ListenUnix(path string, perm fs.FileMode) (net.Listener, error) {
	if perm == 0 {
		perm = 0o600
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSocket == 0 {
		return nil, fmt.Errorf("nbd: listen %s: exists and is not a socket", path)
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".nbd-listen-")
	if err != nil {
		return nil, fmt.Errorf("nbd: listen %s: %w", path, err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("nbd: listen %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, perm); err != nil {
		l.Close()
		return nil, fmt.Errorf("nbd: listen %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		l.Close()
		return nil, fmt.Errorf("nbd: listen %s: %w", path, err)
	}
	return &unixListener{UnixListener: l, path: path}, nil
}

// unixListener removes its socket file on Close.
type unixListener struct {
	*net.UnixListener
	path string
	once sync.Once
}

func (l *unixListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = rerr
		}
	})
	return err
}

// ListenTCP listens on a TCP address. An address without a host
// (":10809") listens on loopback only, 127.0.0.1; other interfaces must
// be named explicitly. NBD carries no authentication of its own: expose
// it beyond loopback only with TLS that verifies clients (see
// Config.TLSConfig and LoopbackOnly).
func ListenTCP(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("nbd: listen %s: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("nbd: listen %s: %w", addr, err)
	}
	return l, nil
}

// LoopbackOnly reports whether ListenTCP(addr) would listen on loopback
// only: addr has no host, a loopback IP, or a name that resolves to
// loopback IPs only. The unspecified addresses (0.0.0.0, ::) are every
// interface, so not loopback.
func LoopbackOnly(ctx context.Context, addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("nbd: address %s: %w", addr, err)
	}
	if host == "" {
		return true, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().IsLoopback(), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return false, fmt.Errorf("nbd: address %s: %w", addr, err)
	}
	for _, ip := range ips {
		if !ip.Unmap().IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}
