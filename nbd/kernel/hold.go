package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/purerbd/purerbd/nbd"
)

// HeldDevice is a running device taken over by its cookie in two steps:
// Hold gives the kernel this process's sockets in place of its dead
// connections at once, before the backend exists, and Serve starts
// answering on them once it does. What the kernel sends meanwhile, the
// requests it resends from the dead connections included, waits unread
// in the sockets, so a successor that needs time to open its backend
// (connect to the cluster, fence its predecessor, take its locks) has
// the kernel's resend delay run beside that work instead of after it.
// Abandon closes the sockets unread, with no request answered, and the
// device is as it was: dead connections waiting for a reattach.
type HeldDevice struct {
	d     *Device
	cfg   AttachConfig
	conns []net.Conn
	done  bool
}

// Hold is the first half of Reattach: cfg as for Reattach, but its
// Backend may be nil (a backend given is checked for the connections
// now) and its Size is ignored (the device keeps its size until Serve).
func Hold(ctx context.Context, cfg AttachConfig) (*HeldDevice, error) {
	if cfg.Cookie == "" {
		return nil, errors.New("nbd hold: no cookie")
	}
	check := cfg
	if check.Backend == nil {
		check.Backend = sizeOnly(0)
	}
	check.Size = 1 // not checked when reattaching
	if err := check.check(true); err != nil {
		return nil, fmt.Errorf("nbd hold: %w", err)
	}
	check.Backend, check.Size = cfg.Backend, 0
	cfg = check // with check's defaults
	client, err := Open(ctx, cfg.Client)
	if err != nil {
		if useIoctl(&cfg, err) {
			err = fmt.Errorf("%w (%s)", ErrReattachUnsupported, MissingFamilyCause(CurrentNetns("")))
		}
		return nil, fmt.Errorf("nbd hold: %w", err)
	}
	h, err := hold(ctx, client, cfg)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("nbd hold %q: %w", cfg.Cookie, err)
	}
	h.d.log.Info("nbd: connections held for the backend", "conns", len(h.conns), "cookie", cfg.Cookie)
	return h, nil
}

// Index is the held device's index (/dev/nbdN).
func (h *HeldDevice) Index() int { return h.d.index }

// Serve starts serving the held connections with backend, first giving
// the device size if it differs (the backend may have been resized
// while nothing served it), and returns the running device; readOnly
// makes the export refuse writes if the held configuration did not.
// After an error the connections are closed unread, as by Abandon.
func (h *HeldDevice) Serve(ctx context.Context, backend nbd.Backend, size int64, readOnly bool) (*Device, error) {
	if h.done {
		return nil, errors.New("nbd: held device already served or abandoned")
	}
	cfg := h.cfg
	cfg.Backend, cfg.Size = backend, size
	d := h.d
	if readOnly {
		d.export.ReadOnly = true
	}
	fail := func(err error) (*Device, error) {
		h.Abandon()
		return nil, fmt.Errorf("nbd serve held %s: %w", d.Path(), err)
	}
	if backend == nil {
		return fail(errors.New("no backend"))
	}
	if err := checkMultiConn(cfg); err != nil {
		return fail(err)
	}
	if size <= 0 || size%int64(cfg.BlockSize) != 0 {
		return fail(fmt.Errorf("size %d is not a positive multiple of the block size %d", size, cfg.BlockSize))
	}
	if cur, err := d.client.DeviceSize(d.index); err == nil && cur != size {
		if err := d.setKernelSize(ctx, size); err != nil {
			return fail(err)
		}
	}
	h.done = true
	d.export.Backend, d.backend = backend, backend
	for _, c := range h.conns {
		d.serve(c)
	}
	h.conns = nil
	d.start()
	d.log.Info("nbd: reattached", "conns", d.Conns(), "offered", h.cfg.Conns, "cookie", h.cfg.Cookie, d.timeoutAttrs())
	return d, nil
}

// Abandon closes the held connections without answering them. The
// kernel sees them die; its I/O waits for the next reattach, within the
// dead connection timeout.
//
// Each connection is ended for the kernel's receive worker first and
// that worker is awaited (for up to abandonWait in all): Linux 6.1's
// worker, when it stops, marks its slot dead and shuts down whichever
// socket the slot holds by then, so a hold that put a fresh socket in
// the slot before the old worker stopped would lose it at once. Closing
// the socket outright instead lets the kernel's send path see the reset
// first, mark the slot dead and take the next hold while the worker is
// still on its way out.
func (h *HeldDevice) Abandon() {
	if h.done {
		return
	}
	h.done = true
	deadline := time.Now().Add(abandonWait)
	for _, c := range h.conns {
		endForKernel(c, deadline)
	}
	h.conns = nil
	h.d.abort()
	h.d.client.Close()
	h.d.log.Info("nbd: held connections abandoned", "cookie", h.cfg.Cookie)
}

// abandonWait bounds how long Abandon waits for the kernel's receive
// workers of the abandoned connections.
const abandonWait = 2 * time.Second

// endForKernel ends the server side of connection c so that the kernel's
// receive worker reads an end of stream, then reads and drops what the
// kernel sent until the worker, stopping, shuts the kernel's end down
// (an end of stream here), or until deadline, and closes c.
func endForKernel(c net.Conn, deadline time.Time) {
	defer c.Close()
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	if c.SetReadDeadline(deadline) != nil {
		return
	}
	_, _ = io.Copy(io.Discard, c)
}

// sizeOnly is a placeholder backend for checking a configuration that
// has none yet.
type sizeOnly int64

func (s sizeOnly) ReadAt(context.Context, []byte, int64) (int, error) {
	return 0, errors.New("no backend")
}
func (s sizeOnly) WriteAt(context.Context, []byte, int64) (int, error) {
	return 0, errors.New("no backend")
}
func (s sizeOnly) Size() int64 { return int64(s) }
