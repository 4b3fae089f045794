package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi/internal/blockdev"
	"github.com/purerbd/purerbd/csi/internal/fsprobe"
	"github.com/purerbd/purerbd/csi/internal/fstools"
	"github.com/purerbd/purerbd/csi/internal/mount"
	"github.com/purerbd/purerbd/csi/internal/nodestate"
	"github.com/purerbd/purerbd/nbd/kernel"
)

// nodeCapability is a volume capability as the node uses it.
type nodeCapability struct {
	block      bool
	fsType     string
	mount      mount.Options
	flags      string // nodestate.FlagsDigest of the mount flags
	mountGroup string
	// mkfsOptions replace the default mkfs options (volume context).
	mkfsOptions string
	mode        csi.VolumeCapability_AccessMode_Mode
	readOnly    bool // a reader-only access mode
	exclusive   bool // a single-node writer mode: keep the image's lock
	// multiTarget says whether the volume may be published at several
	// targets on this node.
	multiTarget bool
}

// parseNodeCapability checks a capability for staging or publishing.
func parseNodeCapability(c *csi.VolumeCapability, volCtx map[string]string, defaultFs string) (nodeCapability, error) {
	var nc nodeCapability
	if c == nil {
		return nc, status.Error(codes.InvalidArgument, "volume capability is required")
	}
	if c.GetAccessType() == nil {
		return nc, status.Error(codes.InvalidArgument, "volume capability has no access type (block or mount)")
	}
	nc.mode = c.GetAccessMode().GetMode()
	if nc.mode == csi.VolumeCapability_AccessMode_UNKNOWN {
		return nc, status.Error(codes.InvalidArgument, "volume capability has no access mode")
	}
	if err := checkCapability(c, true); err != nil {
		return nc, status.Errorf(codes.FailedPrecondition, "volume capability: %v", err)
	}
	if m := c.GetMount(); m != nil {
		nc.fsType = m.GetFsType()
		if nc.fsType == "" {
			nc.fsType = volCtx[ctxFsType]
		}
		if nc.fsType == "" {
			nc.fsType = defaultFs
		}
		if err := checkFsType(nc.fsType); err != nil {
			return nc, status.Errorf(codes.FailedPrecondition, "%s", errorMessage(err))
		}
		o, err := mount.ParseFlags(m.GetMountFlags())
		if err != nil {
			return nc, status.Error(codes.InvalidArgument, err.Error())
		}
		nc.mount, nc.flags = o, nodestate.FlagsDigest(m.GetMountFlags())
		nc.mkfsOptions = volCtx[ctxMkfsOptions]
		if g := m.GetVolumeMountGroup(); g != "" {
			if n, err := strconv.ParseUint(g, 10, 31); err != nil || strconv.FormatUint(n, 10) != g {
				return nc, status.Errorf(codes.InvalidArgument, "volume mount group %q is not a numeric group ID", g)
			}
			nc.mountGroup = g
		}
	} else {
		nc.block = true
	}
	switch nc.mode {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:
		nc.readOnly = true
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:
		nc.exclusive = true
	}
	switch nc.mode {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER:
		nc.multiTarget = true
	}
	return nc, nil
}

// stagedAs reports why a staged volume's record does not match a
// capability, or "" when it does.
func (nc nodeCapability) stagedAs(r *nodestate.Record) string {
	switch {
	case nc.block != r.Block:
		if r.Block {
			return "it is staged as a block volume"
		}
		return "it is staged as a file system"
	case nc.fsType != r.FsType:
		return fmt.Sprintf("it is staged with file system %s", r.FsType)
	case nc.mode.String() != r.AccessMode:
		return fmt.Sprintf("it is staged with access mode %s", r.AccessMode)
	case nc.flags != r.MountFlags:
		return "it is staged with other mount flags"
	case nc.mountGroup != r.MountGroup:
		return "it is staged with another volume mount group"
	}
	return ""
}

// checkPath checks a path argument of a request.
func checkPath(what, p string) error {
	if p == "" {
		return status.Errorf(codes.InvalidArgument, "%s is required", what)
	}
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return status.Errorf(codes.InvalidArgument, "%s %q is not a clean absolute path", what, p)
	}
	return nil
}

func (n *NodeServer) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	staging := req.GetStagingTargetPath()
	if err := checkPath("staging target path", staging); err != nil {
		return nil, err
	}
	nc, err := parseNodeCapability(req.GetVolumeCapability(), req.GetVolumeContext(), n.cfg.DefaultFsType)
	if err != nil {
		return nil, err
	}
	nbdOpts, err := parseMapOptions(req.GetVolumeContext()[ctxMapOptions])
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "volume context: %v", err)
	}
	classDevice := req.GetVolumeContext()[ctxDeviceType]
	if classDevice != "" {
		if err := checkDeviceType(classDevice); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "volume context: %s: %v", ctxDeviceType, err)
		}
	}
	ref, err := parseNodeVolume(id, req.GetVolumeContext())
	if err != nil {
		return nil, err
	}
	unlock, err := n.lockVolume(id, staging)
	if err != nil {
		return nil, err
	}
	defer unlock()

	if v := n.volume(id); v != nil {
		return &csi.NodeStageVolumeResponse{}, n.restage(ctx, v, nc, staging, req.GetSecrets())
	}
	slot, err := n.reserveSlot()
	if err != nil {
		return nil, err
	}
	defer slot.free()
	if err := prepareStagingDir(staging); err != nil {
		return nil, err
	}
	cl, err := n.cluster(ref.clusterID())
	if err != nil {
		return nil, err
	}
	cred, ok, err := n.credentials(req.GetSecrets(), cl.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument,
			"no secrets in the request and no plugin credentials for cluster %q: give the StorageClass a node-stage secret with %q and %q",
			cl.ID, secretUserID, secretUserKey)
	}
	vid, err := n.resolve(ctx, id, ref, cl, cred)
	if err != nil {
		return nil, err
	}
	devType, err := n.deviceTypeFor(classDevice)
	if err != nil {
		return nil, err
	}
	rec := &nodestate.Record{
		VolumeID:    id,
		DeviceType:  devType,
		StagingPath: staging,
		Conns:       n.cfg.Conns,
		Block:       nc.block,
		FsType:      nc.fsType,
		MountFlags:  nc.flags,
		MountGroup:  nc.mountGroup,
		AccessMode:  nc.mode.String(),
		ReadOnly:    nc.readOnly,
		Exclusive:   nc.exclusive,
		// Whole seconds: parseMapOptions takes nothing finer.
		IOTimeout:       int(nbdOpts.IOTimeout / time.Second),
		ReattachTimeout: int(nbdOpts.ReattachTimeout / time.Second),
		Image:           recordImage(ref, vid),
	}
	start := time.Now()
	v, err := n.stage(ctx, vid, cl, cred, rec, nc, slot, n.passphrase(req.GetSecrets(), rec.VolumeID))
	if err != nil {
		return nil, err
	}
	conns := 0
	if s := n.stateOf(v); s.dev != nil { // nil when released at once: Close began
		conns = s.dev.Conns()
	}
	n.log.Info("volume staged", "volumeID", id, "device", rec.DevicePath(), "deviceType", devType, "block", nc.block, "fsType", nc.fsType,
		"readOnly", nc.readOnly, "conns", conns, "duration", time.Since(start).Round(time.Millisecond))
	return &csi.NodeStageVolumeResponse{}, nil
}

// prepareStagingDir makes sure the staging path is a directory with
// nothing mounted on it.
func prepareStagingDir(staging string) error {
	st, err := os.Stat(staging)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(staging, 0o750); err != nil {
			return status.Errorf(codes.Internal, "creating the staging path: %v", err)
		}
		return nil
	}
	if err != nil {
		return status.Errorf(codes.Internal, "staging path: %v", err)
	}
	if !st.IsDir() {
		return status.Errorf(codes.InvalidArgument, "staging path %s is not a directory", staging)
	}
	t, err := mount.ReadTable()
	if err != nil {
		return status.Errorf(codes.Internal, "reading the mount table: %v", err)
	}
	if m, ok := t.At(staging); ok {
		return status.Errorf(codes.AlreadyExists, "something else (%s from %s) is mounted at the staging path %s", m.FsType, m.Source, staging)
	}
	return nil
}

// stage attaches a new volume, formats and mounts it, and adds it to the
// staged volumes in place of slot. On failure it undoes what it did.
func (n *NodeServer) stage(ctx context.Context, vid VolumeID, cl Cluster, cred Credentials, rec *nodestate.Record, nc nodeCapability, slot *stageSlot, passphrase []byte) (_ *nodeVolume, err error) {
	img, err := n.openImage(ctx, vid, cl, cred, rec, passphrase)
	if err != nil {
		return nil, err
	}
	var dev nodeDevice
	var cfg kernel.AttachConfig
	if rec.Ublk() {
		if dev, err = n.attachUblk(ctx, img, rec); err != nil {
			closeImage(context.WithoutCancel(ctx), img)
			if _, ok := status.FromError(err); ok {
				return nil, err
			}
			return nil, status.Errorf(codes.Internal, "attaching volume %q to the kernel as a ublk device: %v", rec.VolumeID, err)
		}
	} else {
		if cfg, err = n.attachConfig(img, rec); err != nil {
			closeImage(ctx, img)
			return nil, err
		}
		kdev, err := kernel.Attach(ctx, cfg)
		if errors.Is(err, kernel.ErrCookieInUse) {
			// A device already carries the volume: left by a process that
			// died before it wrote its state. Take it over; it is ours.
			n.log.Warn("a device already carries the volume's cookie; taking it over", "volumeID", rec.VolumeID)
			cfg.Conns = 0
			kdev, err = kernel.Reattach(ctx, cfg)
		}
		if err != nil {
			closeImage(context.WithoutCancel(ctx), img)
			return nil, status.Errorf(codes.Internal, "attaching volume %q to the kernel: %v", rec.VolumeID, err)
		}
		rec.Cookie = kdev.Cookie()
		dev = kdev
	}
	rec.Index = dev.Index()
	v := &nodeVolume{rec: rec, img: img, dev: dev}
	undo := func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if !rec.Block {
			if t, terr := mount.ReadTable(); terr == nil {
				if _, mounted := t.At(rec.StagingPath); mounted {
					mount.Unmount(rec.StagingPath)
				}
			}
		}
		if derr := dev.Detach(uctx); derr != nil {
			n.log.Error("undoing a failed stage: detach", "volumeID", rec.VolumeID, "error", derr.Error())
		}
		closeImage(uctx, img)
		n.state.Remove(rec.VolumeID)
		n.cfg.Metrics.forget(rec.VolumeID)
	}
	// The record goes to disk before anything else can fail, so that a
	// crash from here on leaves a device the next process can find.
	if err := n.state.Save(rec); err != nil {
		undo()
		return nil, status.Errorf(codes.Internal, "saving the node state: %v", err)
	}
	if kept, err := n.state.SaveSecret(rec.VolumeID, nodestate.Secret{ID: cred.ID, Key: cred.Key, Passphrase: string(passphrase)}); err != nil {
		n.log.Warn("keeping credentials for a restart", "volumeID", rec.VolumeID, "error", err.Error())
	} else if !kept {
		n.log.Debug("credentials not kept: the state directory is not in memory", "volumeID", rec.VolumeID)
	}
	if !rec.ReadOnly {
		// Devices are reused: a read-only flag left by a block
		// publication of another volume must not stay.
		if err := blockdev.SetReadOnly(rec.DevicePath(), false); err != nil {
			undo()
			return nil, status.Errorf(codes.Internal, "%v", err)
		}
	}
	if !rec.Block {
		if err := n.formatAndMount(ctx, rec, nc); err != nil {
			undo()
			return nil, err
		}
	}
	n.addStaged(ctx, v, cfg, slot)
	return v, nil
}

// addStaged adds a volume that was just staged to the staged volumes, in
// place of its slot, and watches its device. When Close has begun
// meanwhile, and so may have released the volumes it knew of already,
// the volume is released here instead: it stays staged (its device,
// mount and node state are there for the next process), but this
// process no longer serves it.
func (n *NodeServer) addStaged(ctx context.Context, v *nodeVolume, cfg kernel.AttachConfig, slot *stageSlot) {
	n.mu.Lock()
	n.vols[v.rec.VolumeID] = v
	if !slot.used {
		slot.used = true
		n.staging--
	}
	closed := n.closed
	dev := v.dev
	n.mu.Unlock()
	if closed {
		n.releaseLate(ctx, v)
		return
	}
	n.watchDevice(v, dev, cfg)
}

// releaseLate releases a volume that a call made served after Close
// began.
func (n *NodeServer) releaseLate(ctx context.Context, v *nodeVolume) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nodeReleaseTimeout)
	defer cancel()
	if err := n.release(rctx, v); err != nil {
		n.log.Error("releasing a volume served after the node service began closing", "volumeID", v.rec.VolumeID, "error", err.Error())
	}
}

// formatAndMount makes a file system on a blank device and mounts the
// device at the staging path.
func (n *NodeServer) formatAndMount(ctx context.Context, rec *nodestate.Record, nc nodeCapability) error {
	dev := rec.DevicePath()
	found, err := fsprobe.Device(ctx, dev)
	if err != nil {
		return status.Errorf(codes.Internal, "reading %s: %v", dev, err)
	}
	switch {
	case found == fsprobe.Blank && rec.ReadOnly:
		return status.Errorf(codes.FailedPrecondition, "volume %q is blank and staged read-only: there is no file system to mount", rec.VolumeID)
	case found == fsprobe.Blank:
		prog, args, err := fstools.MkfsArgs(rec.FsType, nc.mkfsOptions, dev)
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		start := time.Now()
		if _, err := n.cfg.Tools.Run(ctx, prog, args...); err != nil {
			return status.Errorf(codes.Internal, "making the file system: %v", err)
		}
		n.log.Info("file system made", "volumeID", rec.VolumeID, "device", dev, "fsType", rec.FsType, "duration", time.Since(start).Round(time.Millisecond))
	case found == fsprobe.Unknown:
		return status.Errorf(codes.FailedPrecondition, "volume %q holds data that is no file system purerbd knows: refusing to format it", rec.VolumeID)
	case !fsprobe.MountableAs(found, rec.FsType):
		return status.Errorf(codes.FailedPrecondition, "volume %q holds %s, not %s", rec.VolumeID, found, rec.FsType)
	}
	o := nc.mount
	if rec.FsType == "xfs" {
		// Clones and snapshots share the file system UUID of their
		// source; XFS refuses a second mount of a UUID without this.
		o.Data = append(o.Data, "nouuid")
	}
	if rec.ReadOnly {
		// A read-only device cannot replay a journal.
		o.Flags |= unix.MS_RDONLY
		o.Data = append(o.Data, "norecovery")
	}
	if err := mount.FS(dev, rec.StagingPath, rec.FsType, o); err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	if rec.MountGroup != "" && !rec.ReadOnly && o.Flags&unix.MS_RDONLY == 0 {
		if err := applyMountGroup(rec.StagingPath, rec.MountGroup); err != nil {
			return status.Errorf(codes.Internal, "volume mount group: %v", err)
		}
	}
	return nil
}

// applyMountGroup gives the root of a file system to group gid, group
// writable and set-group-ID (new files inherit the group). Files already
// in the volume keep theirs: the recursive change is the CO's
// (fsGroupChangePolicy).
func applyMountGroup(root, gid string) error {
	g, err := strconv.Atoi(gid)
	if err != nil {
		return err
	}
	if err := os.Lchown(root, -1, g); err != nil {
		return err
	}
	st, err := os.Stat(root)
	if err != nil {
		return err
	}
	return os.Chmod(root, st.Mode().Perm()|0o070|os.ModeSetgid)
}

// restage answers a NodeStage for a volume that is already staged.
func (n *NodeServer) restage(ctx context.Context, v *nodeVolume, nc nodeCapability, staging string, secrets map[string]string) error {
	s := n.stateOf(v)
	if s.rec.StagingPath != staging {
		return status.Errorf(codes.AlreadyExists, "volume %q is already staged at %s", s.rec.VolumeID, s.rec.StagingPath)
	}
	if why := nc.stagedAs(&s.rec); why != "" {
		return status.Errorf(codes.AlreadyExists, "volume %q is staged at %s with another capability: %s", s.rec.VolumeID, staging, why)
	}
	if s.broken != nil {
		if err := n.recover(ctx, v, secrets); err != nil {
			return err
		}
		s = n.stateOf(v)
	}
	if s.rec.Block {
		return nil
	}
	// The file system must still be mounted there.
	maj, min, err := blockdev.Number(s.rec.DevicePath())
	if err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	t, err := mount.ReadTable()
	if err != nil {
		return status.Errorf(codes.Internal, "reading the mount table: %v", err)
	}
	if m, ok := t.At(staging); ok {
		if m.Major != maj || m.Minor != min || m.Root != "/" {
			return status.Errorf(codes.AlreadyExists, "something else (%s) is mounted at the staging path %s", m.Source, staging)
		}
		return nil
	}
	n.log.Warn("a staged volume was not mounted at its staging path any more; mounting it again", "volumeID", s.rec.VolumeID)
	return n.formatAndMount(ctx, &s.rec, nc)
}

func (n *NodeServer) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	staging := req.GetStagingTargetPath()
	if err := checkPath("staging target path", staging); err != nil {
		return nil, err
	}
	unlock, err := n.lockVolume(id, staging)
	if err != nil {
		return nil, err
	}
	defer unlock()
	v := n.volume(id)
	if v == nil {
		// Not staged by any process this node remembers. A device may
		// still carry the volume's cookie (a crash before the state was
		// written): clean that up.
		if err := n.unstageUnknown(ctx, id, staging); err != nil {
			return nil, err
		}
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	s := n.stateOf(v)
	if s.rec.StagingPath != staging {
		n.log.Warn("NodeUnstage for another staging path than the volume's; nothing done", "volumeID", id, "stagedAt", s.rec.StagingPath)
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	t, err := mount.ReadTable()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "reading the mount table: %v", err)
	}
	for _, target := range s.rec.Targets() {
		if _, ok := t.At(target); ok {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %q is still published at %s", id, target)
		}
	}
	start := time.Now()
	if !s.rec.Block {
		if err := mount.UnmountAll(staging); err != nil {
			return nil, status.Errorf(codes.Internal, "%v", err)
		}
	}
	if err := n.detach(ctx, v); err != nil {
		return nil, err
	}
	if err := n.state.Remove(id); err != nil {
		return nil, status.Errorf(codes.Internal, "removing the node state: %v", err)
	}
	n.mu.Lock()
	delete(n.vols, id)
	n.mu.Unlock()
	n.cfg.Metrics.forget(id)
	n.log.Info("volume unstaged", "volumeID", id, "device", s.rec.DevicePath(), "duration", time.Since(start).Round(time.Millisecond))
	// The volume's image state, NBD server and request buffers are
	// garbage now; hand their pages back to the node at once rather
	// than keeping the heap the busiest volume grew.
	go debug.FreeOSMemory()
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// unstageUnknown cleans up after a volume the node has no record of: an
// NBD device carrying its cookie, and its file system at the staging
// path.
func (n *NodeServer) unstageUnknown(ctx context.Context, id, staging string) error {
	c, err := kernel.Open(ctx, kernel.ClientConfig{})
	if err != nil {
		if errors.Is(err, kernel.ErrNotLoaded) {
			return nil
		}
		return status.Errorf(codes.Internal, "%v", err)
	}
	defer c.Close()
	if !c.BackendIdentifierSupported() {
		return nil
	}
	idx, err := c.FindByCookie(id)
	if errors.Is(err, kernel.ErrNoSuchDevice) {
		return nil
	}
	if err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	dev := fmt.Sprintf("/dev/nbd%d", idx)
	n.log.Warn("NodeUnstage of a volume without node state: disconnecting the device that carries its cookie", "volumeID", id, "device", dev)
	if maj, min, err := blockdev.Number(dev); err == nil {
		if t, err := mount.ReadTable(); err == nil {
			if m, ok := t.At(staging); ok && m.Major == maj && m.Minor == min {
				if err := mount.UnmountAll(staging); err != nil {
					return status.Errorf(codes.Internal, "%v", err)
				}
			}
		}
	}
	if err := c.Disconnect(ctx, idx); err != nil {
		return status.Errorf(codes.Internal, "disconnecting %s: %v", dev, err)
	}
	if err := waitDisconnected(ctx, c, idx); err != nil {
		return status.Errorf(codes.Internal, "disconnecting %s: %v", dev, err)
	}
	return nil
}
