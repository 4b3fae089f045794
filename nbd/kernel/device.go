package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerbd/purerbd/nbd"
)

// Device is an nbd device served by this process.
type Device struct {
	client    *Client      // nil when attached through ioctls
	ioc       *ioctlDevice // set when attached through ioctls
	srv       *nbd.Server
	export    *nbd.Export
	backend   nbd.Backend
	cookie    string // empty when the kernel has none for this device
	blockSize int64
	log       *slog.Logger

	index int
	live  atomic.Int32 // connections being served

	// The request timeout: fixed, or adaptive when policy is set (see
	// adaptive.go). timeoutMu orders the decisions and the
	// reconfigures that carry them to the kernel.
	fixedTimeout time.Duration
	resend       time.Duration // AttachConfig.ResendInterval
	policy       *timeoutPolicy
	serviceTimes *nbd.ServiceTimes
	timeoutMu    sync.Mutex
	curTimeout   atomic.Int64 // the timeout the kernel was last told
	dropped      atomic.Int64 // connections the kernel dropped, as seen by the healer
	replaced     func()       // AttachConfig.ConnectionReplaced, or nil

	healCtx    context.Context    // the healer's; ends with serveCtx or when no connection is left
	healCancel context.CancelFunc // ends healCtx
	stopHeal   func()             // ends the healer and waits for it

	serveCtx    context.Context // outlives the Attach call; ends with the device
	cancelServe context.CancelFunc
	wg          sync.WaitGroup // serving goroutines
	done        chan struct{}

	errMu sync.Mutex
	err   error // why serving ended, when it was not Detach or Release

	resizeMu   sync.Mutex // orders Resize and size notifications
	stopNotify func()
	notifyDone chan struct{}
	closeOnce  sync.Once
}

func newDevice(client *Client, cfg AttachConfig, cookie string) (*Device, error) {
	scfg := cfg.Server
	scfg.Exports = nil
	var (
		policy *timeoutPolicy
		st     *nbd.ServiceTimes
	)
	if client != nil && cfg.MinTimeout > 0 {
		policy = newTimeoutPolicy(cfg.MinTimeout, cfg.Timeout, cfg.TimeoutWindow)
		st = nbd.NewServiceTimes()
		scfg.ServiceTimes = st
	}
	srv, err := nbd.NewServer(scfg)
	if err != nil {
		return nil, err
	}
	d := &Device{
		fixedTimeout: wholeSeconds(cfg.Timeout),
		resend:       cfg.ResendInterval,
		policy:       policy,
		serviceTimes: st,
		client:       client,
		srv:          srv,
		export:       &nbd.Export{Name: cookie, Backend: cfg.Backend, ReadOnly: cfg.ReadOnly, Rotational: cfg.Rotational},
		backend:      cfg.Backend,
		cookie:       cookie,
		blockSize:    int64(cfg.BlockSize),
		log:          cfg.Logger,
		replaced:     cfg.ConnectionReplaced,
		index:        AnyIndex,
		done:         make(chan struct{}),
		notifyDone:   make(chan struct{}),
	}
	if policy != nil {
		d.curTimeout.Store(int64(policy.timeout()))
	} else {
		d.curTimeout.Store(int64(d.fixedTimeout))
	}
	d.serveCtx, d.cancelServe = context.WithCancel(context.Background())
	d.healCtx, d.healCancel = context.WithCancel(d.serveCtx)
	d.stopHeal = d.healCancel
	return d, nil
}

// serve starts serving one kernel connection.
func (d *Device) serve(c net.Conn) {
	d.wg.Add(1)
	d.live.Add(1)
	go func() {
		defer d.wg.Done()
		err := d.srv.ServeTransmission(d.serveCtx, c, d.export)
		if err != nil && !errors.Is(err, nbd.ErrServerClosed) && !errors.Is(err, context.Canceled) {
			d.log.Warn("nbd: kernel connection failed", "err", err)
		} else {
			err = nil
		}
		d.errMu.Lock()
		defer d.errMu.Unlock()
		if d.live.Add(-1) == 0 {
			// The last connection says why serving ended: one that failed
			// earlier while others went on (and was perhaps replaced) does
			// not. Nothing is left to heal: the device was disconnected,
			// or released, or lost every connection at once.
			if err != nil {
				d.err = err
			}
			d.healCancel()
		}
	}()
}

// start runs the bookkeeping of a device the kernel accepted.
func (d *Device) start() {
	if d.client != nil {
		d.startHealer()
	}
	go func() {
		d.wg.Wait()
		close(d.done)
	}()
	n, ok := d.backend.(nbd.SizeNotifier)
	if !ok || d.index == AnyIndex {
		close(d.notifyDone)
		d.stopNotify = func() {}
		return
	}
	kick := make(chan struct{}, 1)
	stop := make(chan struct{})
	cancel := n.NotifySize(func(int64) {
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	go func() {
		defer close(d.notifyDone)
		for {
			select {
			case <-kick:
				ctx, cancel := context.WithTimeout(d.serveCtx, 30*time.Second)
				if err := d.pushSize(ctx); err != nil {
					d.log.Warn("nbd: telling the kernel about the new size", "err", err)
				}
				cancel()
			case <-stop:
				return
			}
		}
	}()
	d.stopNotify = sync.OnceFunc(func() {
		cancel()
		close(stop)
		<-d.notifyDone
	})
}

// pushSize tells the kernel the backend's current size.
func (d *Device) pushSize(ctx context.Context) error {
	d.resizeMu.Lock()
	defer d.resizeMu.Unlock()
	size := d.backend.Size()
	if size <= 0 || size%d.blockSize != 0 {
		return fmt.Errorf("backend size %d is not a positive multiple of the block size %d", size, d.blockSize)
	}
	return d.setKernelSize(ctx, size)
}

// setKernelSize tells the kernel the device's new size.
func (d *Device) setKernelSize(ctx context.Context, size int64) error {
	if d.ioc != nil {
		return d.ioc.setSize(uint64(size))
	}
	return d.client.Reconfigure(ctx, ReconfigureRequest{Index: d.index, Size: uint64(size), BackendIdentifier: d.cookie})
}

// abort tears down a device the kernel never accepted.
func (d *Device) abort() {
	d.cancelServe()
	d.srv.Close()
	d.wg.Wait()
}

// Index returns N of /dev/nbdN.
func (d *Device) Index() int { return d.index }

// Path returns /dev/nbdN.
func (d *Device) Path() string { return devPath(d.index) }

// Cookie returns the backend cookie the kernel knows the device by, empty
// when it has none.
func (d *Device) Cookie() string { return d.cookie }

// Reattachable reports whether a later process can take the device over
// with Reattach: it has a cookie the kernel knows.
func (d *Device) Reattachable() bool { return d.cookie != "" }

// Interface names how the device was attached: "netlink" (the nbd generic
// netlink family), or "ioctl" on kernels without it (no cookie, no
// reattach, dropped connections are not replaced).
func (d *Device) Interface() string {
	if d.ioc != nil {
		return "ioctl"
	}
	return "netlink"
}

// Conns returns the number of connections this process serves now.
func (d *Device) Conns() int { return int(d.live.Load()) }

// Done is closed when serving has ended: after Detach or Release, or when
// the kernel dropped every connection (someone else disconnected the
// device).
func (d *Device) Done() <-chan struct{} { return d.done }

// Err returns why serving ended, when the last connection failed rather
// than being closed in order; nil while serving goes on, and for a
// failed connection that others outlived.
func (d *Device) Err() error {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	return d.err
}

// Resize changes the size of the device online: the backend (when it is
// an nbd.Resizer and its size differs) and the kernel's view, in the
// order that never lets the kernel see bytes the backend lacks. size must
// be a multiple of the block size.
func (d *Device) Resize(ctx context.Context, size int64) error {
	if size <= 0 || size%d.blockSize != 0 {
		return fmt.Errorf("nbd resize %s: size %d is not a positive multiple of the block size %d", d.Path(), size, d.blockSize)
	}
	d.resizeMu.Lock()
	defer d.resizeMu.Unlock()
	cur := d.backend.Size()
	resizeBackend := func() error {
		if cur == size {
			return nil
		}
		r, ok := d.backend.(nbd.Resizer)
		if !ok {
			return fmt.Errorf("backend %T cannot resize", d.backend)
		}
		return r.Resize(ctx, size)
	}
	tellKernel := func() error { return d.setKernelSize(ctx, size) }
	steps := []func() error{resizeBackend, tellKernel}
	if size < cur {
		steps[0], steps[1] = tellKernel, resizeBackend
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("nbd resize %s to %d: %w", d.Path(), size, err)
		}
	}
	d.log.Info("nbd: resized", "size", size)
	return nil
}

// Detach disconnects the device (NBD_CMD_DISCONNECT) and waits until the
// kernel has closed its connections. The device becomes free for reuse
// once nothing holds it open; unmount first. If ctx ends first the
// connections are cut.
func (d *Device) Detach(ctx context.Context) error {
	d.stopHeal()
	d.stopNotify()
	if d.ioc != nil {
		if err := d.ioc.disconnect(); err != nil {
			return fmt.Errorf("nbd detach %s: %w", d.Path(), err)
		}
	} else if err := d.client.Disconnect(ctx, d.index); err != nil {
		return err
	}
	select {
	case <-d.done:
	case <-ctx.Done():
		d.close()
		return fmt.Errorf("nbd detach %s: waiting for the kernel to close its connections: %w", d.Path(), ctx.Err())
	}
	d.close()
	d.log.Info("nbd: detached")
	return nil
}

// Release stops serving but leaves the device configured, for another
// process (or this one) to Reattach: requests already read are answered,
// nothing more is read, the connections are closed. The kernel holds new
// I/O for up to the dead connection timeout. A request the kernel had
// already sent but the server had not read is resent only when it times
// out (AttachConfig.Timeout), so a release under load can stall that long.
//
// A device attached through ioctls cannot be released: the kernel ends it
// with its last connection. Release then changes nothing and returns
// ErrReattachUnsupported.
func (d *Device) Release(ctx context.Context) error {
	if d.ioc != nil {
		return fmt.Errorf("nbd release %s (attached through ioctls): %w", d.Path(), ErrReattachUnsupported)
	}
	d.stopHeal()
	d.stopNotify()
	err := d.srv.Shutdown(ctx)
	d.close()
	if err != nil {
		return fmt.Errorf("nbd release %s: %w", d.Path(), err)
	}
	d.log.Info("nbd: released for reattach", "cookie", d.cookie)
	return nil
}

// close ends serving and closes the netlink client. A device attached
// through ioctls ends with its connections: the kernel's NBD_DO_IT
// returns once they are closed, and Done waits for that.
func (d *Device) close() {
	d.closeOnce.Do(func() {
		d.cancelServe()
		d.srv.Close()
		<-d.done
		if d.client != nil {
			d.client.Close()
		}
	})
}
