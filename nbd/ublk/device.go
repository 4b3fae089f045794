package ublk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/purerbd/purerbd/nbd"
)

// Defaults of Config.
const (
	DefaultQueueDepth = 64
	DefaultMaxIOBytes = 512 << 10
	DefaultBlockSize  = 4096
)

// Config says how to serve a backend as a ublk device.
type Config struct {
	// Backend holds the data; its optional abilities (nbd.Flusher,
	// Trimmer, Zeroer, ReadOnlyBackend) decide the device's (a volatile
	// cache with FUA, discard, write zeroes, read-only).
	Backend nbd.Backend
	// ID asks for device /dev/ublkb<ID> when FixedID is set; otherwise
	// the kernel picks a free one.
	ID      int
	FixedID bool
	// Queues is the number of hardware queues, each served by a thread
	// of its own (default 1; the kernel caps it at the CPU count);
	// QueueDepth the requests in flight per queue (default 64).
	Queues     int
	QueueDepth int
	// MaxIOBytes bounds one request (default 512 KiB; a multiple of the
	// page size). Each queue holds QueueDepth buffers of this size.
	MaxIOBytes int
	// BlockSize is the logical block size, 512 to 4096 (default 4096).
	BlockSize int
	// Logger gets a line for each device event (nil logs nothing).
	Logger *slog.Logger
	// Tag is kept by the kernel with a device that Serve adds (its
	// ublksrv_flags, which the kernel never reads), so that another
	// process can tell the device its own: Find. Recover keeps the
	// device's.
	Tag uint64
	// Observer, when set, is told of every request served, as an NBD
	// server tells it (read, write, flush, trim, write_zeroes).
	Observer nbd.Observer
	// Buffers, when set, lends the buffers requests' data is copied
	// through with user copy, as nbd.Config.Buffers does for an NBD
	// server; nil: each queue keeps its own pool.
	Buffers nbd.BufferPool
	// NoUserCopy keeps a buffer per tag that the kernel copies requests'
	// data into and out of, also where the kernel offers user copy
	// (UBLK_F_USER_COPY, Linux 6.5). By default a device uses user copy
	// where it can: each request's handler copies its data through the
	// character device with a pooled buffer, one system call more per
	// read or write, and an idle device holds no buffers (per-tag
	// buffers keep whatever the largest requests touched, up to
	// QueueDepth × MaxIOBytes per queue, for the device's life).
	NoUserCopy bool
	// NoBatchIO serves the queues one request per command (FETCH_REQ,
	// COMMIT_AND_FETCH_REQ on a thread of the queue's own) also where
	// the kernel offers batch I/O (UBLK_F_BATCH_IO, Linux 7.0), which a
	// device with user copy uses by default: one multishot command
	// fetches a queue's requests in batches and any thread commits
	// results in batches, so that no request waits for a hand-off to
	// the queue's thread. A device keeps the mode it was added with,
	// also across Recover.
	NoBatchIO bool
}

func (c *Config) fill() error {
	if c.Backend == nil {
		return errors.New("ublk: no backend")
	}
	if c.Queues <= 0 {
		c.Queues = 1
	}
	if c.QueueDepth <= 0 {
		c.QueueDepth = DefaultQueueDepth
	}
	if c.QueueDepth > maxQueueDepth {
		return fmt.Errorf("ublk: queue depth %d above %d", c.QueueDepth, maxQueueDepth)
	}
	if c.MaxIOBytes <= 0 {
		c.MaxIOBytes = DefaultMaxIOBytes
	}
	if c.MaxIOBytes%4096 != 0 {
		return fmt.Errorf("ublk: MaxIOBytes %d is no multiple of the page size", c.MaxIOBytes)
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.BlockSize < 512 || c.BlockSize > 4096 || c.BlockSize&(c.BlockSize-1) != 0 {
		return fmt.Errorf("ublk: block size %d is no power of two from 512 to 4096", c.BlockSize)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Device is a ublk device served by this process.
type Device struct {
	ctrl   *Control
	info   DevInfo
	char   *os.File
	queues []*queue
	cancel context.CancelFunc
	done   chan struct{} // closed when every queue has ended
	err    error         // the first queue error, set before done closes
	log    *slog.Logger
	closed bool
	// blockSize is the logical block size the device was given
	blockSize int
}

// ID returns the device id N of /dev/ublkbN.
func (d *Device) ID() int { return int(d.info.ID) }

// Path returns the block device's path.
func (d *Device) Path() string { return BlockPath(d.ID()) }

// Info returns the device as the kernel described it when this process
// took it (its flags are those the kernel kept).
func (d *Device) Info() DevInfo { return d.info }

// Done is closed when the device's queues have ended: the device was
// stopped (by Stop, or by another process's STOP_DEV), or abandoned.
func (d *Device) Done() <-chan struct{} { return d.done }

// Err returns why the queues ended, after Done: nil for a stop.
func (d *Device) Err() error {
	<-d.done
	return d.err
}

// Tag returns the tag the kernel keeps with the device (Config.Tag).
func (d *Device) Tag() uint64 { return d.info.Tag }

// Resize changes the size of the block device to size bytes (a
// multiple of the block size), once the backend holds that many: the
// kernel tells the file systems and udev, as for a disk that grew. It
// fails with ErrNoResize on kernels before 6.16.
func (d *Device) Resize(ctx context.Context, size int64) error {
	if size <= 0 || size%int64(d.blockSize) != 0 {
		return fmt.Errorf("ublk device %d: size %d is no positive multiple of the block size %d", d.ID(), size, d.blockSize)
	}
	if err := d.ctrl.UpdateSize(ctx, d.ID(), uint64(size)>>sectorShift); err != nil {
		return err
	}
	d.log.Info("ublk device resized", "id", d.ID(), "bytes", size)
	return nil
}

// BlockPath returns the path of block device id.
func BlockPath(id int) string { return fmt.Sprintf("/dev/ublkb%d", id) }

// CharPath returns the path of the character device of device id.
func CharPath(id int) string { return fmt.Sprintf("/dev/ublkc%d", id) }

// paramsFor derives a device's parameters from its backend.
func paramsFor(cfg Config, maxIO uint32) Params {
	shift := uint8(0)
	for 1<<shift < cfg.BlockSize {
		shift++
	}
	p := Params{
		LogicalBSShift:  shift,
		PhysicalBSShift: max(shift, 12),
		IOMinShift:      shift,
		IOOptShift:      max(shift, 12),
		MaxSectors:      maxIO >> sectorShift,
		// whole blocks: a last partial one would be unreadable
		DevSectors: uint64(cfg.Backend.Size()&^int64(cfg.BlockSize-1)) >> sectorShift,
	}
	if _, ok := cfg.Backend.(nbd.Flusher); ok {
		p.Attrs |= attrVolatileCache | attrFUA
	}
	if ro, ok := cfg.Backend.(nbd.ReadOnlyBackend); ok && ro.ReadOnly() {
		p.Attrs |= attrReadOnly
	}
	_, trims := cfg.Backend.(nbd.Trimmer)
	_, zeroes := cfg.Backend.(nbd.Zeroer)
	if trims || zeroes {
		p.DiscardGranularity = uint32(cfg.BlockSize)
		if trims {
			p.MaxDiscardSectors = (1 << 30) >> sectorShift
		}
		if zeroes {
			p.MaxWriteZeroes = (1 << 30) >> sectorShift
		}
	}
	return p
}

// Serve adds a ublk device for cfg.Backend, starts its queues and the
// block device, and returns once /dev/ublkbN exists. The device has user
// recovery: if this process dies, Recover in another takes it over.
// Stop ends it.
func Serve(ctx context.Context, cfg Config) (*Device, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	ctrl, err := OpenControl(ctx)
	if err != nil {
		return nil, err
	}
	flags := uint64(FlagUserRecovery | FlagUserRecoveryReissue)
	if ctrl.encoded {
		flags |= FlagCmdIoctlEncode
	}
	if ctrl.features&FlagUserCopy != 0 && !cfg.NoUserCopy {
		flags |= FlagUserCopy
		if ctrl.features&FlagBatchIO != 0 && ctrl.encoded && !cfg.NoBatchIO {
			flags |= FlagBatchIO
		}
	}
	want := DevInfo{
		Queues: uint16(cfg.Queues), QueueDepth: uint16(cfg.QueueDepth),
		MaxIOBufBytes: uint32(cfg.MaxIOBytes), ID: anyDevice, Flags: flags, Tag: cfg.Tag,
	}
	if cfg.FixedID {
		want.ID = uint32(cfg.ID)
	}
	info, err := ctrl.AddDev(ctx, want)
	if err != nil {
		ctrl.Close()
		return nil, err
	}
	id := int(info.ID)
	cfg.Logger.Info("ublk device added", "id", id, "queues", info.Queues, "depth", info.QueueDepth,
		"max_io", info.MaxIOBufBytes, "flags", fmt.Sprintf("%#x", info.Flags))
	fail := func(err error) (*Device, error) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = ctrl.DelDev(dctx, id)
		ctrl.Close()
		return nil, err
	}
	if info.Flags&FlagUserRecovery == 0 {
		return fail(fmt.Errorf("ublk device %d: %w (flags %#x)", id, ErrNoRecovery, info.Flags))
	}
	if err := ctrl.SetParams(ctx, id, paramsFor(cfg, info.MaxIOBufBytes)); err != nil {
		return fail(err)
	}
	d, err := attach(ctx, ctrl, info, cfg)
	if err != nil {
		return fail(err)
	}
	if err := ctrl.StartDev(ctx, id, os.Getpid()); err != nil {
		d.abandon()
		return fail(err)
	}
	cfg.Logger.Info("ublk device started", "id", id, "path", d.Path())
	return d, nil
}

// Recover takes over device id, whose server process died, with a new
// set of queues serving cfg.Backend (which must hold the same data):
// START_USER_RECOVERY, retried while the kernel still says the device is
// busy (the old process's files are being released), then new queues,
// then END_USER_RECOVERY, after which the I/O the kernel held resumes.
// The queue count, depth and buffer size are the device's own.
func Recover(ctx context.Context, id int, cfg Config) (*Device, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	ctrl, err := OpenControl(ctx)
	if err != nil {
		return nil, err
	}
	info, err := ctrl.DevInfo(ctx, id)
	if err != nil {
		ctrl.Close()
		return nil, err
	}
	if info.Flags&FlagUserRecovery == 0 {
		ctrl.Close()
		return nil, fmt.Errorf("ublk device %d: %w", id, ErrNoRecovery)
	}
	for {
		err = ctrl.StartUserRecovery(ctx, id)
		if !errors.Is(err, ErrBusy) {
			break
		}
		select {
		case <-ctx.Done():
			ctrl.Close()
			return nil, fmt.Errorf("ublk device %d still busy: %w", id, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
	if err != nil {
		ctrl.Close()
		return nil, err
	}
	cfg.Logger.Info("ublk recovery started", "id", id, "old_pid", info.ServerPID)
	d, err := attach(ctx, ctrl, info, cfg)
	if err != nil {
		ctrl.Close()
		return nil, err
	}
	if err := ctrl.EndUserRecovery(ctx, id, os.Getpid()); err != nil {
		d.abandon()
		ctrl.Close()
		return nil, err
	}
	cfg.Logger.Info("ublk recovery ended", "id", id)
	return d, nil
}

// attach opens the character device, maps every queue and starts its
// thread, and returns once all have fetched their requests.
func attach(ctx context.Context, ctrl *Control, info DevInfo, cfg Config) (*Device, error) {
	id := int(info.ID)
	char, err := openChar(ctx, id)
	if err != nil {
		return nil, err
	}
	qctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d := &Device{ctrl: ctrl, info: info, char: char, cancel: cancel, done: make(chan struct{}), log: cfg.Logger, blockSize: cfg.BlockSize}
	for i := range int(info.Queues) {
		q, err := newQueue(uint16(i), info, int(char.Fd()), ctrl.encoded, cfg.Backend, cfg.Observer, cfg.Buffers, cfg.Logger)
		if err != nil {
			close(d.done)
			d.abandon()
			return nil, err
		}
		d.queues = append(d.queues, q)
	}
	ready := make(chan error, len(d.queues))
	errs := make(chan error, len(d.queues))
	for _, q := range d.queues {
		go func() { errs <- q.run(qctx, ready) }()
	}
	go func() {
		for range d.queues {
			if err := <-errs; err != nil && d.err == nil && qctx.Err() == nil {
				d.err = err
			}
		}
		close(d.done)
	}()
	for range d.queues {
		if err := <-ready; err != nil {
			d.abandon()
			return nil, fmt.Errorf("ublk device %d: %w", id, err)
		}
	}
	return d, nil
}

// openChar opens /dev/ublkcN, waiting for devtmpfs or udev to make it.
func openChar(ctx context.Context, id int) (*os.File, error) {
	path := CharPath(id)
	for {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("ublk: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("ublk: %s did not appear: %w", path, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// abandon stops serving without telling the kernel, as a crash would:
// a device with user recovery then holds its I/O for a new server.
func (d *Device) abandon() {
	d.cancel()
	<-d.done
	d.release()
}

// release frees this process's side once the queues have ended.
func (d *Device) release() {
	if d.closed {
		return
	}
	d.closed = true
	for _, q := range d.queues {
		q.release()
	}
	d.queues = nil
	d.char.Close()
}

// Abandon leaves the device to the kernel without stopping it: I/O
// waits for a Recover, from this process or another. After a stop by
// another process (Done closed), it only frees this process's side, so
// that the other's DEL_DEV can finish. The Device is unusable
// afterwards.
func (d *Device) Abandon() {
	d.abandon()
	d.ctrl.Close()
}

// Stop removes the block device (STOP_DEV), waits for the queues to end
// and deletes the device (DEL_DEV).
func (d *Device) Stop(ctx context.Context) error {
	id := d.ID()
	if err := d.ctrl.StopDev(ctx, id); err != nil {
		return err
	}
	select {
	case <-d.done:
	case <-ctx.Done():
		return fmt.Errorf("ublk device %d: queues still running after STOP_DEV: %w", id, ctx.Err())
	}
	if d.err != nil {
		d.log.Warn("ublk queue ended with an error", "id", id, "err", d.err)
	}
	st := d.Stats()
	d.cancel()
	d.release()
	err := d.ctrl.DelDev(ctx, id)
	d.ctrl.Close()
	if err != nil {
		return err
	}
	d.log.Info("ublk device deleted", "id", id, "requests", st.Requests, "fetches", st.Fetches, "wakeups", st.Wakeups, "commits", st.Commits)
	return nil
}

// Remove stops and deletes device id served by another process (or by
// none): STOP_DEV ends its server's queues, and DEL_DEV returns once
// that server has let go of the device.
func Remove(ctx context.Context, id int) error {
	c, err := OpenControl(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.StopDev(ctx, id); err != nil {
		return err
	}
	return c.DelDev(ctx, id)
}
