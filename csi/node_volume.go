package csi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi/internal/nodestate"
	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/kernel"
	"github.com/purerbd/purerbd/nbd/rbdnbd"
	"github.com/purerbd/purerbd/nbd/ublk"
)

// nodeVolume is a staged volume. Its fields are guarded by NodeServer.mu;
// the operations that change them also hold the volume's operation lock.
type nodeVolume struct {
	rec *nodestate.Record
	img NodeImage  // nil while broken
	dev nodeDevice // nil while broken
	// broken says why the volume is not served by this process (its
	// takeover after a restart failed, or its device went away); nil
	// when it is served.
	broken error
	watch  *watchdog
}

// volumeState is a consistent copy of a volume's fields.
type volumeState struct {
	rec    nodestate.Record
	img    NodeImage
	dev    nodeDevice
	broken error
}

func (n *NodeServer) stateOf(v *nodeVolume) volumeState {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := volumeState{rec: *v.rec, img: v.img, dev: v.dev, broken: v.broken}
	s.rec.Published = make(map[string]nodestate.Publication, len(v.rec.Published))
	for k, p := range v.rec.Published {
		s.rec.Published[k] = p
	}
	return s
}

// update changes a volume's record under the lock and saves it.
func (n *NodeServer) update(v *nodeVolume, fn func(r *nodestate.Record)) error {
	n.mu.Lock()
	fn(v.rec)
	r := *v.rec
	n.mu.Unlock()
	if err := n.state.Save(&r); err != nil {
		return status.Errorf(codes.Internal, "saving the node state: %v", err)
	}
	return nil
}

// openImage opens the image of a volume as the record says.
func (n *NodeServer) openImage(ctx context.Context, vid VolumeID, cl Cluster, cred Credentials, rec *nodestate.Record, passphrase []byte) (NodeImage, error) {
	img, err := n.cfg.Opener.OpenImage(ctx, cl, cred, vid, OpenImageOptions{ReadOnly: rec.ReadOnly, Exclusive: rec.Exclusive, Node: n.cfg.NodeID})
	if err != nil {
		return nil, storeError(err, cred, "opening the image of volume %q", rec.VolumeID)
	}
	return n.openEncrypted(ctx, img, rec.VolumeID, passphrase)
}

// passphrase is the encryption passphrase of a volume: the request's
// secret's, or the one kept for a restart. Nil when there is none (the
// volume is not encrypted, or a call with secrets must bring it).
func (n *NodeServer) passphrase(secrets map[string]string, volumeID string) []byte {
	if p := secrets[secretEncryptionPassphrase]; p != "" {
		return []byte(p)
	}
	if s, ok, err := n.state.LoadSecret(volumeID); err == nil && ok && s.Passphrase != "" {
		return []byte(s.Passphrase)
	}
	return nil
}

// attachConfig describes the device of a volume for kernel.Attach or
// kernel.Reattach.
func (n *NodeServer) attachConfig(img NodeImage, rec *nodestate.Record) (kernel.AttachConfig, error) {
	size, err := blockBytes(img, rec)
	if err != nil {
		return kernel.AttachConfig{}, err
	}
	cfg := n.deviceConfig(rec)
	cfg.Backend, cfg.Size = rbdnbd.New(img), size
	return cfg, nil
}

// blockBytes is the size of the block device of a volume's image: its
// whole 4 KiB blocks (NBD and ublk devices alike), at least one.
func blockBytes(img NodeImage, rec *nodestate.Record) (int64, error) {
	size := img.Size() &^ (kernel.DefaultBlockSize - 1)
	if size <= 0 {
		return 0, status.Errorf(codes.FailedPrecondition, "the image of volume %q is %d bytes, too small for a block device", rec.VolumeID, img.Size())
	}
	return size, nil
}

// deviceConfig is attachConfig without the image: what kernel.Hold
// needs to take a volume's device over before its image is open.
func (n *NodeServer) deviceConfig(rec *nodestate.Record) kernel.AttachConfig {
	t := n.nbdTimeouts(rec)
	obs := n.cfg.Metrics.volume(rec.VolumeID)
	return kernel.AttachConfig{
		Server:             nbd.Config{Observer: obs.nbdObserver(), Buffers: &n.buffers},
		ConnectionReplaced: obs.connectionReplaced,
		Conns:              rec.Conns,
		Timeout:            t.timeout,
		MinTimeout:         t.min,
		ResendInterval:     t.resend,
		DeadConnTimeout:    t.reattach,
		Cookie:             rec.VolumeID,
		ReadOnly:           rec.ReadOnly,
		Index:              kernel.AnyIndex,
		Logger:             n.log.With("volumeID", rec.VolumeID),
	}
}

// nbdTimeouts are a volume's NBD timeouts.
type nbdTimeouts struct {
	timeout, min time.Duration // request timeout, its floor; 0: none
	resend       time.Duration // without a request timeout
	reattach     time.Duration // dead connection timeout
}

// nbdTimeouts returns a volume's NBD timeouts: the node's, unless the
// volume's class set its own (mapOptions io-timeout, reattach-timeout).
// A volume timeout replaces the node's: it is the ceiling where the
// node's adapts (the floor capped by it), fixed otherwise. Without a
// request timeout a device has its requests resent after a restart;
// one attached with several connections (by an earlier plugin) cannot
// be served so and keeps the kernel's default timeout.
func (n *NodeServer) nbdTimeouts(rec *nodestate.Record) nbdTimeouts {
	t := nbdTimeouts{timeout: n.cfg.IOTimeout, min: n.cfg.MinIOTimeout, reattach: n.cfg.ReattachTimeout}
	if rec.IOTimeout > 0 {
		v := time.Duration(rec.IOTimeout) * time.Second
		if t.timeout == 0 || t.min == t.timeout {
			t.min = v
		} else {
			t.min = min(t.min, v)
		}
		t.timeout = v
	}
	if rec.ReattachTimeout > 0 {
		t.reattach = time.Duration(rec.ReattachTimeout) * time.Second
	}
	if t.timeout == 0 {
		if rec.Conns > 1 {
			t.timeout, t.min = kernelDefaultRequestTimeout, kernelDefaultRequestTimeout
		} else {
			t.resend = n.cfg.ResendInterval
		}
	}
	return t
}

// kernelDefaultRequestTimeout is nbd.ko's request timeout when told none,
// for devices with several connections.
const kernelDefaultRequestTimeout = 30 * time.Second

// credentialCandidates lists the credentials to try for taking a volume
// over: the request's secrets, the secret kept for it, the plugin's own.
func (n *NodeServer) credentialCandidates(secrets map[string]string, rec *nodestate.Record, clusterID string) ([]Credentials, error) {
	var l []Credentials
	if len(secrets) > 0 {
		c, ok, err := n.credentials(secrets, clusterID)
		if err != nil {
			return nil, err
		}
		if ok {
			l = append(l, c)
		}
	}
	if c, ok, err := n.state.LoadSecret(rec.VolumeID); err != nil {
		n.log.Warn("kept credentials unreadable", "volumeID", rec.VolumeID, "error", err.Error())
	} else if ok {
		l = append(l, Credentials{ID: c.ID, Key: c.Key})
	}
	if c, ok, _ := n.credentials(nil, clusterID); ok {
		l = append(l, c)
	}
	return l, nil
}

// errWaitingForSecrets marks a volume that a restarted plugin cannot
// reopen until a call brings credentials.
var errWaitingForSecrets = errors.New("no credentials to reopen the image: waiting for a call with secrets (NodeStage, NodePublish or NodeExpand)")

// recover takes over the device of a staged volume that this process
// does not serve: reopen the image, reattach by cookie. On failure the
// volume is marked broken with the reason, which is also returned.
func (n *NodeServer) recover(ctx context.Context, v *nodeVolume, secrets map[string]string) (err error) {
	rec := n.stateOf(v).rec
	defer func() {
		if err != nil {
			n.mu.Lock()
			v.broken = err
			n.mu.Unlock()
		}
	}()
	if rec.Cookie == "" && !rec.Ublk() {
		return status.Errorf(codes.FailedPrecondition, "volume %q was attached without a backend cookie (Linux before 5.14): its device cannot be taken over; unstage it", rec.VolumeID)
	}
	vid, err := recordedVolume(&rec)
	if err != nil {
		return status.Errorf(codes.Internal, "node state holds a bad volume ID: %v", err)
	}
	cl, err := n.cluster(vid.ClusterID)
	if err != nil {
		return err
	}
	creds, err := n.credentialCandidates(secrets, &rec, vid.ClusterID)
	if err != nil {
		return err
	}
	if len(creds) == 0 {
		return status.Error(codes.Unavailable, errWaitingForSecrets.Error())
	}
	start := time.Now()
	var img NodeImage
	var cred Credentials
	var dev nodeDevice
	var cfg kernel.AttachConfig
	if rec.Ublk() {
		// The kernel holds the device's I/O (user recovery) until a
		// server takes it over: the image first, then the device.
		img, cred, err = n.openCandidates(ctx, vid, cl, creds, &rec, n.passphrase(secrets, rec.VolumeID))
		if err != nil {
			return err
		}
		if dev, err = n.recoverUblk(ctx, img, &rec); err != nil {
			closeImage(context.WithoutCancel(ctx), img)
			return ublkTakeoverError(rec.VolumeID, err)
		}
	} else {
		// The device at once, beside the image's opening (which connects
		// and fences the dead predecessor first): the kernel's sockets to
		// the dead process are replaced with held ones, so that its resend
		// of what that process held runs while the image opens
		// (kernel.HeldDevice). As many sockets as the device was
		// configured with: the record's count (sysfs shows the kernel's
		// hardware queues, which blk-mq caps at the CPU count, so more
		// connections than CPUs would stay dead). Older records without it
		// fall back on sysfs.
		type holding struct {
			held *kernel.HeldDevice
			err  error
		}
		hc := make(chan holding, 1)
		go func() {
			h, err := kernel.Hold(ctx, n.deviceConfig(&rec))
			hc <- holding{h, err}
		}()
		img, cred, err = n.openCandidates(ctx, vid, cl, creds, &rec, n.passphrase(secrets, rec.VolumeID))
		h := <-hc
		if h.err != nil {
			if err == nil {
				closeImage(context.WithoutCancel(ctx), img)
			}
			return takeoverError(rec.VolumeID, h.err)
		}
		held := h.held
		if err != nil {
			held.Abandon()
			return err
		}
		cfg, err = n.attachConfig(img, &rec)
		if err != nil {
			held.Abandon()
			closeImage(ctx, img)
			return err
		}
		kdev, err := held.Serve(ctx, cfg.Backend, cfg.Size, cfg.ReadOnly)
		if err != nil {
			closeImage(context.WithoutCancel(ctx), img)
			return takeoverError(rec.VolumeID, err)
		}
		dev = kdev
	}
	n.mu.Lock()
	v.img, v.dev, v.broken = img, dev, nil
	v.rec.Index = dev.Index()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		// Close may have released this volume already, before the
		// takeover served it again.
		n.releaseLate(ctx, v)
		return status.Error(codes.Unavailable, "the node service is shutting down")
	}
	if err := n.update(v, func(*nodestate.Record) {}); err != nil {
		n.log.Warn("saving the node state after a takeover", "volumeID", rec.VolumeID, "error", errorMessage(err))
	}
	if _, err := n.state.SaveSecret(rec.VolumeID, nodestate.Secret{ID: cred.ID, Key: cred.Key}); err != nil {
		n.log.Warn("keeping credentials for a restart", "volumeID", rec.VolumeID, "error", err.Error())
	}
	n.watchDevice(v, dev, cfg)
	obs := n.cfg.Metrics.volume(rec.VolumeID)
	obs.stalled() // the kernel held its I/O from the old server's end to now
	obs.reattached(reattachTakeover)
	n.log.Info("volume taken over", "volumeID", rec.VolumeID, "device", dev.Path(), "conns", dev.Conns(),
		"duration", time.Since(start).Round(time.Millisecond))
	return nil
}

// openCandidates opens a volume's image with the first of creds that
// the cluster takes, and returns the credentials it took.
func (n *NodeServer) openCandidates(ctx context.Context, vid VolumeID, cl Cluster, creds []Credentials, rec *nodestate.Record, passphrase []byte) (NodeImage, Credentials, error) {
	var img NodeImage
	var err error
	for i, c := range creds {
		img, err = n.openImage(ctx, vid, cl, c, rec, passphrase)
		if err == nil || status.Code(err) != codes.Unauthenticated || i == len(creds)-1 {
			return img, c, err
		}
	}
	return nil, Credentials{}, err
}

// ublkTakeoverError is the status of a failed takeover of a volume's
// ublk device.
func ublkTakeoverError(volumeID string, err error) error {
	code := codes.Internal
	if errors.Is(err, ublk.ErrNoDevice) || errors.Is(err, ublk.ErrNoRecovery) {
		code = codes.FailedPrecondition // the device is gone: unstage
	}
	return status.Errorf(code, "taking over the ublk device of volume %q: %v", volumeID, err)
}

// takeoverError is the status of a failed takeover of a volume's device.
func takeoverError(volumeID string, err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, kernel.ErrNoSuchDevice), errors.Is(err, kernel.ErrNotConnected):
		code = codes.FailedPrecondition // the device is gone: unstage
	case errors.Is(err, kernel.ErrNoDeadConnection):
		code = codes.FailedPrecondition // another process serves it
	}
	return status.Errorf(code, "taking over the device of volume %q: %v", volumeID, err)
}

// release stops serving a volume's device without disconnecting it, for
// the next plugin process, and closes the image.
func (n *NodeServer) release(ctx context.Context, v *nodeVolume) error {
	n.stopWatch(v)
	n.mu.Lock()
	dev, img := v.dev, v.img
	v.dev, v.img = nil, nil
	if v.broken == nil {
		v.broken = errors.New("released: the plugin is shutting down")
	}
	id := v.rec.VolumeID
	n.mu.Unlock()
	if dev == nil && img == nil {
		return nil // not served: broken, or released already
	}
	var errs []error
	if dev != nil {
		if err := dev.Release(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if img != nil {
		if err := closeImage(ctx, img); err != nil {
			errs = append(errs, fmt.Errorf("closing the image: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("volume %q: %w", id, err)
	}
	n.log.Info("volume released for the next plugin process", "volumeID", id)
	return nil
}

// detach disconnects a volume's device and closes its image. A broken
// volume's device, if the kernel still has it under the volume's cookie,
// is disconnected too.
func (n *NodeServer) detach(ctx context.Context, v *nodeVolume) error {
	n.stopWatch(v)
	n.mu.Lock()
	dev, img, rec := v.dev, v.img, *v.rec
	v.dev, v.img = nil, nil
	n.mu.Unlock()
	switch {
	case dev != nil:
		if err := dev.Detach(ctx); err != nil {
			return status.Errorf(codes.Internal, "disconnecting %s: %v", dev.Path(), err)
		}
	case rec.Ublk():
		if err := removeUblkByTag(ctx, rec.VolumeID); err != nil {
			return status.Errorf(codes.Internal, "removing the ublk device of volume %q: %v", rec.VolumeID, err)
		}
	default:
		if err := disconnectByCookie(ctx, rec.VolumeID); err != nil {
			return status.Errorf(codes.Internal, "disconnecting the device of volume %q: %v", rec.VolumeID, err)
		}
	}
	if img != nil {
		if err := closeImage(ctx, img); err != nil {
			// The data is safe (flushed by the disconnect); a lock left
			// behind is broken by the next opener.
			n.log.Warn("closing the image", "volumeID", rec.VolumeID, "error", redact(err.Error(), Credentials{}))
		}
	}
	return nil
}

// disconnectByCookie disconnects the device that carries cookie, if any.
func disconnectByCookie(ctx context.Context, cookie string) error {
	c, err := kernel.Open(ctx, kernel.ClientConfig{})
	if err != nil {
		if errors.Is(err, kernel.ErrNotLoaded) {
			return nil
		}
		return err
	}
	defer c.Close()
	if !c.BackendIdentifierSupported() {
		return nil
	}
	idx, err := c.FindByCookie(cookie)
	if errors.Is(err, kernel.ErrNoSuchDevice) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.Disconnect(ctx, idx); err != nil {
		return err
	}
	return waitDisconnected(ctx, c, idx)
}

// waitDisconnected polls until the kernel no longer has device idx
// configured.
func waitDisconnected(ctx context.Context, c *kernel.Client, idx int) error {
	for {
		st, ok, err := c.DeviceStatus(ctx, idx)
		if err != nil {
			return err
		}
		if !ok || !st.Connected {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
