package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi/internal/nodestate"
	"github.com/purerbd/purerbd/nbd/kernel"
	"github.com/purerbd/purerbd/nbd/rbdnbd"
	"github.com/purerbd/purerbd/nbd/ublk"
)

// The node's device types (NodeConfig.DeviceType, and a class's
// deviceType parameter).
const (
	// DeviceAuto serves volumes through ublk where the kernel offers
	// all that the node needs of it (ublk_drv with user recovery, the
	// reissue of requests a dead server held, and resizing a live
	// device: Linux 6.16 and later), through nbd.ko elsewhere.
	DeviceAuto = "auto"
	DeviceNBD  = nodestate.DeviceNBD
	DeviceUblk = nodestate.DeviceUblk
	// DefaultDeviceType is the node's default.
	DefaultDeviceType = DeviceAuto
)

// checkDeviceType checks a device type named by a flag or a class.
func checkDeviceType(t string) error {
	switch t {
	case DeviceAuto, DeviceNBD, DeviceUblk:
		return nil
	}
	return fmt.Errorf("device type %q: want %s, %s or %s", t, DeviceAuto, DeviceNBD, DeviceUblk)
}

// nodeDevice is the kernel block device that serves a staged volume's
// image: an NBD device (*kernel.Device) or a ublk one (ublkDevice).
type nodeDevice interface {
	Path() string
	Index() int
	// Conns is the device's live connections (NBD) or queues (ublk).
	Conns() int
	// Done is closed when the device stops being served by this
	// process for a reason of the kernel's; Err says why.
	Done() <-chan struct{}
	Err() error
	// Resize tells the kernel the image's new size.
	Resize(ctx context.Context, size int64) error
	// Release stops serving, leaving the device with its I/O held for
	// the next process.
	Release(ctx context.Context) error
	// Detach removes the device once its I/O is done.
	Detach(ctx context.Context) error
}

var (
	_ nodeDevice = (*kernel.Device)(nil)
	_ nodeDevice = ublkDevice{}
)

// ublkDevice is a volume's ublk device, served by this process.
type ublkDevice struct{ d *ublk.Device }

func (u ublkDevice) Path() string          { return u.d.Path() }
func (u ublkDevice) Index() int            { return u.d.ID() }
func (u ublkDevice) Conns() int            { return int(u.d.Info().Queues) }
func (u ublkDevice) Done() <-chan struct{} { return u.d.Done() }
func (u ublkDevice) Err() error            { return u.d.Err() }

func (u ublkDevice) Resize(ctx context.Context, size int64) error {
	if err := u.d.Resize(ctx, size); err != nil {
		if errors.Is(err, ublk.ErrNoResize) {
			return status.Errorf(codes.FailedPrecondition, "%s cannot grow while staged: %v; unstage and stage the volume again", u.d.Path(), err)
		}
		return err
	}
	return nil
}

// Release leaves the device to the kernel as a crash would: with user
// recovery, it holds the I/O for the next process's ublk.Recover. The
// requests this process took and did not complete are issued again to
// that process.
func (u ublkDevice) Release(context.Context) error {
	u.d.Abandon()
	return nil
}

func (u ublkDevice) Detach(ctx context.Context) error { return u.d.Stop(ctx) }

// ublkSupport is what the kernel's ublk driver offers the node.
type ublkSupport struct {
	usable bool   // ublk_drv with user recovery and reissue
	resize bool   // and UPDATE_SIZE
	why    string // what is missing, when !usable or !resize
}

// probeUblk loads ublk_drv and reads the driver's features.
func (n *NodeServer) probeUblk(ctx context.Context) ublkSupport {
	m := n.cfg.Module
	if err := ublk.LoadModule(ctx, ublk.ModuleConfig{RootDir: m.RootDir, IgnoreStatus: m.IgnoreStatus, SysfsRoot: m.SysfsRoot, Logger: m.Logger}); err != nil {
		return ublkSupport{why: err.Error()}
	}
	c, err := ublk.OpenControl(ctx)
	if err != nil {
		return ublkSupport{why: err.Error()}
	}
	defer c.Close()
	f := c.Features()
	var s ublkSupport
	switch {
	case f&ublk.FlagUserRecovery == 0 || f&ublk.FlagUserRecoveryReissue == 0:
		s.why = fmt.Sprintf("the kernel's ublk has no user recovery with reissue (features %#x)", f)
	case f&ublk.FeatureUpdateSize == 0:
		s.usable, s.why = true, fmt.Sprintf("the kernel's ublk cannot resize a live device (features %#x; Linux 6.16 can): volumes cannot grow while staged", f)
	default:
		s.usable, s.resize = true, true
	}
	return s
}

// deviceTypeFor picks the device type of a volume being staged: the
// class's (volume context), else the node's; auto is ublk where the
// kernel offers all the node needs of it.
func (n *NodeServer) deviceTypeFor(class string) (string, error) {
	t := class
	if t == "" || t == DeviceAuto {
		t = n.cfg.DeviceType
	}
	n.mu.Lock()
	u := n.ublk
	n.mu.Unlock()
	switch t {
	case DeviceNBD:
		return DeviceNBD, nil
	case DeviceUblk:
		if !u.usable {
			return "", status.Errorf(codes.FailedPrecondition, "the volume asks for a ublk device and this node's kernel cannot serve one: %s", u.why)
		}
		return DeviceUblk, nil
	}
	if u.usable && u.resize {
		return DeviceUblk, nil
	}
	return DeviceNBD, nil
}

// ublkConfig describes the ublk device of a volume.
func (n *NodeServer) ublkConfig(img NodeImage, rec *nodestate.Record) ublk.Config {
	obs := n.cfg.Metrics.volume(rec.VolumeID)
	return ublk.Config{
		Backend:  rbdnbd.New(img),
		Queues:   max(rec.Conns, 1),
		Tag:      nodestate.UblkTag(rec.VolumeID),
		Observer: obs.nbdObserver(),
		Buffers:  &n.buffers,
		Logger:   n.log.With("volumeID", rec.VolumeID),
	}
}

// attachUblk makes the ublk device of a volume being staged. A device
// that already carries the volume's tag (left by a process that died
// before it wrote its state) is taken over instead.
func (n *NodeServer) attachUblk(ctx context.Context, img NodeImage, rec *nodestate.Record) (nodeDevice, error) {
	if _, err := blockBytes(img, rec); err != nil {
		return nil, err
	}
	cfg := n.ublkConfig(img, rec)
	info, err := ublk.Find(ctx, cfg.Tag)
	switch {
	case err == nil:
		n.log.Warn("a ublk device already carries the volume's tag; taking it over", "volumeID", rec.VolumeID, "device", ublk.BlockPath(int(info.ID)))
		return recoverUblkDevice(ctx, int(info.ID), cfg)
	case !errors.Is(err, ublk.ErrNoDevice):
		return nil, err
	}
	d, err := ublk.Serve(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return ublkDevice{d}, nil
}

// recoverUblk takes over the ublk device of a volume whose image this
// process just opened: the device the kernel keeps under the volume's
// tag, which must be the record's.
func (n *NodeServer) recoverUblk(ctx context.Context, img NodeImage, rec *nodestate.Record) (nodeDevice, error) {
	cfg := n.ublkConfig(img, rec)
	info, err := ublk.Find(ctx, cfg.Tag)
	if err != nil {
		return nil, err
	}
	if int(info.ID) != rec.Index {
		return nil, fmt.Errorf("the volume's ublk device is %s, its record says %s", ublk.BlockPath(int(info.ID)), rec.DevicePath())
	}
	return recoverUblkDevice(ctx, rec.Index, cfg)
}

// recoverUblkDevice takes ublk device id over with cfg's backend.
func recoverUblkDevice(ctx context.Context, id int, cfg ublk.Config) (nodeDevice, error) {
	d, err := ublk.Recover(ctx, id, cfg)
	if err != nil {
		return nil, err
	}
	return ublkDevice{d}, nil
}

// removeUblkByTag removes the ublk device that carries the volume's tag,
// if any.
func removeUblkByTag(ctx context.Context, volumeID string) error {
	info, err := ublk.Find(ctx, nodestate.UblkTag(volumeID))
	if errors.Is(err, ublk.ErrNoDevice) {
		return nil
	}
	if err != nil {
		return err
	}
	return ublk.Remove(ctx, int(info.ID))
}

// deviceSize returns the size of a volume's device as the block layer
// sees it.
func deviceSize(rec *nodestate.Record) (int64, error) {
	b, err := os.ReadFile(filepath.Join("/sys/block", rec.DeviceName(), "size"))
	if err != nil {
		return 0, err
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, err
	}
	return sectors * 512, nil
}

// deviceCarriesVolume says whether the kernel's device still carries
// the volume: an NBD device by its backend cookie; a ublk device is
// there as long as the kernel has it (its tag is checked when it is
// taken over).
func deviceCarriesVolume(rec *nodestate.Record) bool {
	if rec.Ublk() {
		_, err := os.Stat(filepath.Join("/sys/block", rec.DeviceName()))
		return err == nil
	}
	b, err := os.ReadFile(filepath.Join("/sys/block", rec.DeviceName(), "backend"))
	if err != nil {
		return false
	}
	return rec.Cookie == "" || strings.TrimSpace(string(b)) == rec.Cookie
}
