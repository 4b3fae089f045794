package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/nbd"
)

// DefaultBlockSize is the logical block size of attached devices unless
// told otherwise: 512 bytes, as krbd and rbd-nbd use, so that file systems
// made elsewhere with 512-byte sectors still mount.
const DefaultBlockSize = 512

// AttachConfig describes an export to attach, or to reattach.
type AttachConfig struct {
	// Backend holds the data.
	Backend nbd.Backend
	// Size of the device in bytes; 0 means Backend.Size(). It must be a
	// multiple of BlockSize.
	Size int64
	// BlockSize is the logical block size: a power of two from 512 to the
	// page size (default DefaultBlockSize).
	BlockSize uint32
	// Conns is the number of connections, one kernel queue each (default
	// 1). More than one needs a backend that is coherent across
	// connections (nbd.MultiConnCoherent). Reattach defaults to the number
	// the device was configured with.
	Conns int
	// Timeout is the kernel's per-request timeout (0: kernel default, 30
	// s), in whole seconds (rounded up). With MinTimeout it is the
	// ceiling of an adaptive timeout.
	//
	// The kernel resends a request that was in flight on a connection
	// that died only when the request times out, so the timeout bounds
	// the stall of a restart of the server. A request that outlives it
	// on a live server is resent too (the kernel drops its connection,
	// which the Device replaces), and the first copy may still be
	// executed by the backend.
	Timeout time.Duration
	// MinTimeout, when set, makes the request timeout adapt between it
	// (the floor, where the device starts) and Timeout: each connection
	// the kernel drops (a request outlived the timeout) doubles it, and
	// it halves again once the requests the server serves have been well
	// under it for a while (TimeoutWindow). A short floor (1 s) bounds
	// the stall of a server restart to about two seconds while requests
	// are fast; the ceiling keeps a slow cluster from having every
	// request resent. The kernel keeps the timeout a request started with
	// across resends, so requests already in flight when a backend
	// stalls are resent every MinTimeout until it recovers; later ones
	// get the raised timeout. Zero keeps Timeout fixed. It needs
	// DeadConnTimeout (a device whose every connection was dropped at once
	// would fail its I/O), and the netlink interface: a device attached
	// through ioctls keeps Timeout fixed.
	MinTimeout time.Duration
	// ResendInterval, when set, turns the request timeout off and keeps
	// the kernel's look at requests in flight every ResendInterval: a
	// request on a live server is never resent and never fails, however
	// long the backend takes (the kernel logs "Possible stuck request"
	// each time it looks), and a request in flight when the server died
	// is resent at the kernel's first look after Reattach replaced the
	// connection. The kernel looks at a request once it is older than
	// ResendInterval, on the block layer's timer, which mostly fires at
	// whole seconds of its clock, then about every ResendInterval or
	// second. So the stall of a server restart is the time to reattach
	// (at least ResendInterval) rounded up to about the kernel's next
	// whole second, and no connection is ever
	// dropped while the server lives (dropping and
	// replacing connections under load races in the kernel's receive
	// worker, Linux 6.1 to 7.2 at the least: it reads the slot's current
	// socket, and a reply of the old connection can land in the new one).
	//
	// The kernel handles requests this way only on a device with one
	// connection: it needs Conns 1 (a Reattach of a device with more
	// keeps its fixed timeout, logged) and excludes Timeout and
	// MinTimeout. The interval is the queue's io_timeout in sysfs.
	ResendInterval time.Duration
	// TimeoutWindow is how often an adaptive timeout weighs the service
	// times it saw (default DefaultTimeoutWindow); it comes down after
	// two calm windows at the least.
	TimeoutWindow time.Duration
	// DeadConnTimeout is how long the kernel holds I/O when every
	// connection is dead, waiting for a reattach; 0 fails I/O at once, so
	// set it for devices that must survive a restart of their server.
	DeadConnTimeout time.Duration
	// Cookie names the device so that a later process can Reattach it
	// (NBD_ATTR_BACKEND_IDENTIFIER). Ignored by kernels before 5.14.
	Cookie string
	// ReadOnly attaches the device read-only.
	ReadOnly bool
	// Rotational tells the kernel the medium is a spinning disk.
	Rotational bool
	// Index is the device to use for Attach: AnyIndex lets the kernel pick
	// a free one (the zero value means /dev/nbd0). Reattach finds the
	// device by Cookie and ignores Index.
	Index int
	// DestroyOnDisconnect removes /dev/nbdN when it is disconnected.
	DestroyOnDisconnect bool
	// Ioctl attaches through the nbd driver's ioctls even where the
	// netlink family exists. Attach falls back to them by itself where
	// the family is missing (before Linux 4.12, or before 6.4 outside
	// the initial network namespace). Such a device has
	// no cookie and cannot be reattached or released, ignores
	// DeadConnTimeout and DestroyOnDisconnect, needs a free existing
	// /dev/nbdN (the module's nbds_max), and a connection the kernel
	// drops is not replaced.
	Ioctl bool
	// Server tunes the NBD server (in-flight limits, logger); its Exports
	// are ignored.
	Server nbd.Config
	// Client tunes the netlink client (sysfs root, tracing).
	Client ClientConfig
	// ConnectionReplaced, when set, is called each time the Device hands
	// the kernel a fresh socket in place of a connection it dropped (for
	// metrics); it must not block.
	ConnectionReplaced func()
	// Logger receives device events; nil logs nothing.
	Logger *slog.Logger
}

// DefaultTimeoutWindow is the default AttachConfig.TimeoutWindow.
const DefaultTimeoutWindow = 5 * time.Second

// kernelDefaultTimeout is the request timeout the kernel uses when told
// none.
const kernelDefaultTimeout = 30 * time.Second

// reattachRetry bounds how long Reattach waits for the kernel to notice
// that the old server's connections died.
const reattachRetry = 2 * time.Second

func (cfg *AttachConfig) check(reattach bool) error {
	if cfg.Backend == nil {
		return errors.New("no backend")
	}
	if cfg.BlockSize == 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	if cfg.BlockSize < 512 || bits.OnesCount32(cfg.BlockSize) != 1 {
		return fmt.Errorf("block size %d is not a power of two of at least 512", cfg.BlockSize)
	}
	if cfg.Size == 0 {
		cfg.Size = cfg.Backend.Size()
	}
	if !reattach {
		if cfg.Size <= 0 || cfg.Size%int64(cfg.BlockSize) != 0 {
			return fmt.Errorf("size %d is not a positive multiple of the block size %d", cfg.Size, cfg.BlockSize)
		}
		if cfg.Conns == 0 {
			cfg.Conns = 1
		}
	}
	if cfg.Conns < 0 || cfg.Conns > 1024 {
		return fmt.Errorf("%d connections", cfg.Conns)
	}
	if cfg.Timeout < 0 || cfg.MinTimeout < 0 || cfg.DeadConnTimeout < 0 || cfg.TimeoutWindow < 0 || cfg.ResendInterval < 0 {
		return errors.New("negative timeout")
	}
	if cfg.ResendInterval > 0 {
		switch {
		case cfg.Timeout > 0 || cfg.MinTimeout > 0:
			return errors.New("a resend interval turns the request timeout off: give no Timeout or MinTimeout with it")
		case cfg.Conns > 1:
			return fmt.Errorf("a resend interval needs one connection, not %d: the kernel drops connections on timeouts otherwise", cfg.Conns)
		case cfg.DeadConnTimeout == 0:
			return errors.New("a resend interval needs a dead connection timeout: requests sent while the server is away would fail at once")
		}
	}
	if cfg.MinTimeout > 0 {
		if cfg.Timeout == 0 {
			cfg.Timeout = kernelDefaultTimeout
		}
		if seconds(cfg.MinTimeout) > seconds(cfg.Timeout) {
			return fmt.Errorf("minimum request timeout %v above the timeout %v", cfg.MinTimeout, cfg.Timeout)
		}
		if cfg.DeadConnTimeout == 0 {
			return errors.New("an adaptive request timeout (MinTimeout) needs a dead connection timeout: " +
				"a device whose connections were all dropped at once would fail its I/O")
		}
		if cfg.TimeoutWindow == 0 {
			cfg.TimeoutWindow = DefaultTimeoutWindow
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Client.Logger == nil {
		cfg.Client.Logger = cfg.Logger
	}
	if cfg.Server.Logger == nil {
		cfg.Server.Logger = cfg.Logger
	}
	return nil
}

// Attach serves cfg.Backend to the kernel over cfg.Conns socketpairs and
// returns the device once the kernel has it. The device is served until
// Detach or Release, or until the kernel disconnects it.
//
// On a kernel without backend cookies the device is attached without its
// cookie and Reattachable reports false. A cookie already carried by
// another device is refused with ErrCookieInUse (reattach that device).
//
// Without the nbd netlink family (a kernel before 4.12, or before 6.4
// outside the initial network namespace; see MissingFamilyCause), or with
// cfg.Ioctl, the device is attached through ioctls instead (see
// AttachConfig.Ioctl for what that loses).
func Attach(ctx context.Context, cfg AttachConfig) (*Device, error) {
	if err := cfg.check(false); err != nil {
		return nil, fmt.Errorf("nbd attach: %w", err)
	}
	if cfg.Ioctl {
		return attachIoctl(ctx, cfg)
	}
	client, err := Open(ctx, cfg.Client)
	if err != nil {
		if useIoctl(&cfg, err) {
			cfg.Logger.Warn("nbd: " + MissingFamilyCause(CurrentNetns("")) + "; attaching through ioctls: " +
				"the device cannot be reattached after this process ends, and connections the kernel drops are not replaced")
			return attachIoctl(ctx, cfg)
		}
		return nil, fmt.Errorf("nbd attach: %w", err)
	}
	d, err := attach(ctx, client, cfg)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("nbd attach: %w", err)
	}
	return d, nil
}

func attach(ctx context.Context, client *Client, cfg AttachConfig) (*Device, error) {
	flags := serverFlags(cfg.Backend, cfg.ReadOnly, cfg.Rotational)
	if cfg.Conns > 1 && flags&FlagCanMultiConn == 0 {
		return nil, fmt.Errorf("%d connections need a backend coherent across connections (nbd.MultiConnCoherent)", cfg.Conns)
	}
	cookie := cfg.Cookie
	if cookie != "" {
		if !client.BackendIdentifierSupported() {
			cfg.Logger.Warn("nbd: kernel predates backend cookies (Linux 5.14): attaching without one, reattach will not be possible", "cookie", cookie)
			cookie = ""
		} else if i, err := client.FindByCookie(cookie); err == nil {
			return nil, &CookieError{Err: ErrCookieInUse, Index: i, Want: cookie, Have: cookie}
		} else if !errors.Is(err, ErrNoSuchDevice) {
			return nil, err
		}
	}
	d, err := newDevice(client, cfg, cookie)
	if err != nil {
		return nil, err
	}
	pairs, err := newSocketPairs(cfg.Conns)
	if err != nil {
		d.srv.Close()
		return nil, err
	}
	// Serve before the kernel gets its ends, so that nothing it sends
	// while it sets the device up can wait on us.
	for i := range pairs {
		c, err := pairs[i].serverConn()
		if err != nil {
			closePairs(pairs)
			d.abort()
			return nil, err
		}
		d.serve(c)
	}
	var cflags ClientFlags
	if cfg.DestroyOnDisconnect {
		cflags |= DestroyOnDisconnect
	}
	index, err := client.Connect(ctx, ConnectRequest{
		Index:             cfg.Index,
		Size:              uint64(cfg.Size),
		BlockSize:         uint64(cfg.BlockSize),
		Timeout:           d.Timeout(),
		DeadConnTimeout:   cfg.DeadConnTimeout,
		ServerFlags:       flags,
		ClientFlags:       cflags,
		Sockets:           kernelEnds(pairs),
		BackendIdentifier: cookie,
	})
	closeKernelEnds(pairs)
	if err != nil {
		d.abort()
		return nil, err
	}
	d.index = index
	d.log = d.log.With("device", d.Path())
	d.applyResendInterval()
	d.start()
	d.log.Info("nbd: attached", "size", cfg.Size, "block_size", cfg.BlockSize, "conns", cfg.Conns, "flags", fmt.Sprintf("%#x", uint64(flags)), "cookie", cookie,
		d.timeoutAttrs())
	return d, nil
}

// Reattach takes over the device that carries cfg.Cookie, typically after
// the process that served it died: it hands the kernel fresh sockets in
// place of the dead connections (NBD_CMD_RECONFIGURE) and serves
// cfg.Backend on them. I/O that waited resumes. The size is updated when
// the backend's differs from the device's.
//
// Errors: ErrReattachUnsupported on kernels without cookies,
// ErrNoSuchDevice, ErrNotConnected when the device lost its configuration
// (its dead connection timeout ran out), ErrNoDeadConnection when another
// server still serves it.
func Reattach(ctx context.Context, cfg AttachConfig) (*Device, error) {
	if err := cfg.check(true); err != nil {
		return nil, fmt.Errorf("nbd reattach: %w", err)
	}
	if cfg.Size <= 0 || cfg.Size%int64(cfg.BlockSize) != 0 {
		return nil, fmt.Errorf("nbd reattach: size %d is not a positive multiple of the block size %d", cfg.Size, cfg.BlockSize)
	}
	h, err := Hold(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return h.Serve(ctx, cfg.Backend, cfg.Size, cfg.ReadOnly)
}

// hold finds the device by cookie and replaces its dead connections with
// fresh sockets whose server ends it keeps unread (HeldDevice). A
// backend, if cfg has one, is checked for the connections first;
// nothing reads it before Serve.
func hold(ctx context.Context, client *Client, cfg AttachConfig) (*HeldDevice, error) {
	if !client.BackendIdentifierSupported() {
		return nil, ErrReattachUnsupported
	}
	index, err := client.FindByCookie(cfg.Cookie)
	if err != nil {
		return nil, err
	}
	st, ok, err := client.DeviceStatus(ctx, index)
	if err != nil {
		return nil, err
	}
	if !ok || !st.Connected {
		return nil, fmt.Errorf("/dev/nbd%d: %w", index, ErrNotConnected)
	}
	if cfg.Conns == 0 || cfg.ResendInterval > 0 {
		n, err := client.Connections(index)
		if err != nil {
			return nil, err
		}
		if cfg.Conns == 0 {
			cfg.Conns = max(n, 1)
		}
		if cfg.ResendInterval > 0 && n > 1 {
			cfg.Logger.Warn("nbd: the device has more than one connection, which a resend interval cannot serve: keeping a fixed request timeout",
				"device", devPath(index), "conns", n, "timeout", kernelDefaultTimeout)
			cfg.ResendInterval, cfg.Timeout = 0, kernelDefaultTimeout
		}
	}
	if cfg.Backend != nil {
		if err := checkMultiConn(cfg); err != nil {
			return nil, err
		}
	}
	d, err := newDevice(client, cfg, cfg.Cookie)
	if err != nil {
		return nil, err
	}
	d.index = index
	d.log = d.log.With("device", d.Path())
	h := &HeldDevice{d: d, cfg: cfg}
	if d.resend > 0 {
		// The timeout first, alone: a RECONFIGURE that turns the request
		// timeout off also gives the queue the kernel's default 30 s,
		// and the requests that the new sockets wake would start with it
		// and keep it (resent 30 s late if their socket died again). So
		// the resend interval goes in before any socket does.
		if err := client.Reconfigure(ctx, ReconfigureRequest{Index: index, NoTimeout: true, BackendIdentifier: cfg.Cookie}); err != nil {
			d.abort()
			return nil, err
		}
		d.applyResendInterval()
	}
	deadline := time.Now().Add(reattachRetry)
	for {
		conns, err := d.offerSockets(ctx, cfg.Conns, ReconfigureRequest{
			Timeout: d.Timeout(), DeadConnTimeout: cfg.DeadConnTimeout,
		})
		if err != nil {
			d.abort()
			return nil, err
		}
		if len(conns) > 0 {
			h.conns = conns
			return h, nil
		}
		// The kernel may not have seen the old connections die yet.
		if time.Now().After(deadline) {
			d.abort()
			return nil, fmt.Errorf("/dev/nbd%d: %w", index, ErrNoDeadConnection)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			d.abort()
			return nil, ctx.Err()
		}
	}
}

// checkMultiConn refuses several connections to a backend that is not
// coherent across them.
func checkMultiConn(cfg AttachConfig) error {
	if cfg.Conns > 1 && serverFlags(cfg.Backend, cfg.ReadOnly, cfg.Rotational)&FlagCanMultiConn == 0 {
		return fmt.Errorf("%d connections need a backend coherent across connections (nbd.MultiConnCoherent)", cfg.Conns)
	}
	return nil
}

// offerSockets sends one RECONFIGURE of the device, with req's settings
// and n fresh sockets, and returns the server ends of those the kernel
// kept (one per dead connection), unread.
func (d *Device) offerSockets(ctx context.Context, n int, req ReconfigureRequest) ([]net.Conn, error) {
	pairs, err := newSocketPairs(n)
	if err != nil {
		return nil, err
	}
	req.Index, req.Sockets, req.BackendIdentifier = d.index, kernelEnds(pairs), d.cookie
	err = d.client.Reconfigure(ctx, req)
	closeKernelEnds(pairs)
	if err != nil {
		closePairs(pairs)
		return nil, err
	}
	var conns []net.Conn
	for i := range pairs {
		gone, err := pairs[i].peerGone()
		if err != nil || gone {
			continue
		}
		c, err := pairs[i].serverConn()
		if err != nil {
			closePairs(pairs)
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
		conns = append(conns, c)
	}
	closePairs(pairs)
	return conns, nil
}

// attachIoctl attaches through the nbd driver's ioctls: on a free
// /dev/nbdN (cfg.Index, or the first the kernel does not run), whose
// setup thread then blocks in NBD_DO_IT for as long as the device runs.
func attachIoctl(ctx context.Context, cfg AttachConfig) (*Device, error) {
	d, err := attachIoctlDevice(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("nbd attach (ioctl interface): %w", err)
	}
	return d, nil
}

func attachIoctlDevice(ctx context.Context, cfg AttachConfig) (*Device, error) {
	flags := serverFlags(cfg.Backend, cfg.ReadOnly, cfg.Rotational)
	if cfg.Conns > 1 && flags&FlagCanMultiConn == 0 {
		return nil, fmt.Errorf("%d connections need a backend coherent across connections (nbd.MultiConnCoherent)", cfg.Conns)
	}
	if cfg.Cookie != "" {
		cfg.Logger.Warn("nbd: the ioctl interface has no backend cookie: attaching without one, reattach will not be possible", "cookie", cfg.Cookie)
	}
	if cfg.DeadConnTimeout > 0 {
		cfg.Logger.Warn("nbd: the ioctl interface has no dead connection timeout: I/O fails as soon as the server goes", "dead_conn_timeout", cfg.DeadConnTimeout)
	}
	if cfg.MinTimeout > 0 {
		cfg.Logger.Info("nbd: the ioctl interface cannot change the request timeout of a running device: it stays fixed at the ceiling",
			"timeout", wholeSeconds(cfg.Timeout), "min_timeout", cfg.MinTimeout)
	}
	sys := sysfsAt(cfg.Client.SysfsRoot)
	candidates := []int{cfg.Index}
	if cfg.Index == AnyIndex {
		free, err := sys.freeIndexes()
		if err != nil {
			return nil, err
		}
		if len(free) == 0 {
			return nil, errors.New("no free nbd device (the ioctl interface cannot add devices: load nbd with a larger nbds_max)")
		}
		candidates = free
	}
	d, err := newDevice(nil, cfg, "")
	if err != nil {
		return nil, err
	}
	setup := ioctlSetup{size: uint64(cfg.Size), blockSize: uint64(cfg.BlockSize), timeout: cfg.Timeout, flags: flags}
	var (
		ioc   *ioctlDevice
		pairs []socketPair
	)
	for _, index := range candidates {
		if pairs, err = newSocketPairs(cfg.Conns); err != nil {
			d.abort()
			return nil, err
		}
		setup.sockets = kernelEnds(pairs)
		ioc, err = startIoctl(devPath(index), setup)
		closeKernelEnds(pairs) // the kernel holds its own references
		if err == nil {
			d.index = index
			break
		}
		closePairs(pairs)
		// Another process set the device up meanwhile (EBUSY), or it is
		// a netlink device (EINVAL): try the next.
		if cfg.Index != AnyIndex || !(errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EINVAL)) {
			d.abort()
			return nil, err
		}
	}
	if ioc == nil {
		d.abort()
		return nil, fmt.Errorf("every free nbd device was taken meanwhile: %w", err)
	}
	d.ioc = ioc
	d.log = d.log.With("device", d.Path())
	// Done waits for the kernel to let go of the device too.
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		<-ioc.ended
		d.errMu.Lock()
		if d.err == nil {
			d.err = ioc.err
		}
		d.errMu.Unlock()
	}()
	// Undo a device that never ran: NBD_DO_IT returns once its
	// connections are closed.
	fail := func(err error) (*Device, error) {
		_ = ioc.disconnect()
		closePairs(pairs)
		d.abort()
		return nil, err
	}
	for i := range pairs {
		c, err := pairs[i].serverConn()
		if err != nil {
			return fail(err)
		}
		d.serve(c)
	}
	if err := ioc.waitRunning(ctx, sys, d.index, cfg.Size); err != nil {
		return fail(err)
	}
	d.start()
	d.log.Info("nbd: attached through ioctls", "size", cfg.Size, "block_size", cfg.BlockSize, "conns", cfg.Conns, "flags", fmt.Sprintf("%#x", uint64(flags)))
	return d, nil
}
