package csi

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi/internal/blockdev"
	"github.com/purerbd/purerbd/csi/internal/mount"
	"github.com/purerbd/purerbd/csi/internal/nodestate"
)

func (n *NodeServer) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	target := req.GetTargetPath()
	if err := checkPath("target path", target); err != nil {
		return nil, err
	}
	nc, err := parseNodeCapability(req.GetVolumeCapability(), req.GetVolumeContext(), n.cfg.DefaultFsType)
	if err != nil {
		return nil, err
	}
	staging := req.GetStagingTargetPath()
	if staging == "" {
		return nil, status.Error(codes.FailedPrecondition, "staging target path is required: stage the volume first")
	}
	if err := checkPath("staging target path", staging); err != nil {
		return nil, err
	}
	if target == staging {
		return nil, status.Error(codes.InvalidArgument, "target path and staging target path are the same")
	}
	unlock, err := n.lockVolume(id, target)
	if err != nil {
		return nil, err
	}
	defer unlock()
	v := n.volume(id)
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %q is not staged on this node", id)
	}
	s := n.stateOf(v)
	if s.rec.StagingPath != staging {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q is staged at %s, not %s", id, s.rec.StagingPath, staging)
	}
	if nc.block != s.rec.Block || nc.fsType != s.rec.FsType || nc.mode.String() != s.rec.AccessMode {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q is published with another capability than it was staged with: %s", id, nc.stagedAs(&s.rec))
	}
	if s.broken != nil {
		if err := n.recover(ctx, v, req.GetSecrets()); err != nil {
			return nil, err
		}
		s = n.stateOf(v)
	}
	pub := nodestate.Publication{ReadOnly: req.GetReadonly() || s.rec.ReadOnly, MountFlags: nc.flags, MountGroup: nc.mountGroup}
	t, err := mount.ReadTable()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "reading the mount table: %v", err)
	}
	devPath := s.rec.DevicePath()
	if old, ok := s.rec.Published[target]; ok {
		if old != pub {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q is already published at %s with other arguments", id, target)
		}
		if m, mounted := t.At(target); mounted {
			if !isPublication(m, target, devPath, s.rec.Block) {
				return nil, status.Errorf(codes.AlreadyExists, "something else (%s) is mounted at %s", m.Source, target)
			}
			return &csi.NodePublishVolumeResponse{}, nil
		}
		n.log.Warn("a publication was not mounted any more; mounting it again", "volumeID", id, "target", target)
	} else {
		if m, mounted := t.At(target); mounted {
			if !isPublication(m, target, devPath, s.rec.Block) || m.ReadOnly() != pub.ReadOnly {
				return nil, status.Errorf(codes.AlreadyExists, "something (%s) is already mounted at %s", m.Source, target)
			}
			// Published by a process that died before it recorded it.
			if err := n.update(v, func(r *nodestate.Record) {
				if r.Published == nil {
					r.Published = map[string]nodestate.Publication{}
				}
				r.Published[target] = pub
			}); err != nil {
				return nil, err
			}
			n.log.Warn("found the volume already published at the target; recorded it", "volumeID", id, "target", target)
			return &csi.NodePublishVolumeResponse{}, nil
		}
		if !nc.multiTarget {
			for _, other := range s.rec.Targets() {
				if _, mounted := t.At(other); mounted {
					return nil, status.Errorf(codes.FailedPrecondition, "volume %q has access mode %s and is already published at %s", id, nc.mode, other)
				}
			}
		}
	}

	o := mount.Options{Flags: nc.mount.Flags & mount.VFSFlags}
	if pub.ReadOnly {
		o.Flags |= unix.MS_RDONLY
	}
	if s.rec.Block {
		if err := setBlockAccess(&s.rec, target, pub.ReadOnly, t); err != nil {
			return nil, err
		}
		if err := makeBlockTarget(target); err != nil {
			return nil, err
		}
		if err := mount.Bind(devPath, target, o); err != nil {
			return nil, status.Errorf(codes.Internal, "%v", err)
		}
	} else {
		if err := os.MkdirAll(target, 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "creating the target path: %v", err)
		}
		if err := mount.Bind(staging, target, o); err != nil {
			return nil, status.Errorf(codes.Internal, "%v", err)
		}
		if pub.MountGroup != "" && !pub.ReadOnly {
			if err := applyMountGroup(target, pub.MountGroup); err != nil {
				mount.Unmount(target)
				return nil, status.Errorf(codes.Internal, "volume mount group: %v", err)
			}
		}
	}
	if err := n.update(v, func(r *nodestate.Record) {
		if r.Published == nil {
			r.Published = map[string]nodestate.Publication{}
		}
		r.Published[target] = pub
	}); err != nil {
		mount.Unmount(target)
		return nil, err
	}
	n.log.Info("volume published", "volumeID", id, "target", target, "readOnly", pub.ReadOnly, "block", s.rec.Block)
	return &csi.NodePublishVolumeResponse{}, nil
}

// setBlockAccess makes the device of a block volume staged read-write
// read-only for a read-only publication at target, or writable for a
// read-write one. Publications of both kinds at once are refused: the
// read-only flag is the whole device's. (A volume staged with a
// reader-only access mode has a read-only device from the start.)
func setBlockAccess(rec *nodestate.Record, target string, readOnly bool, t mount.Table) error {
	if rec.ReadOnly {
		return nil
	}
	for other, p := range rec.Published {
		if other == target || p.ReadOnly == readOnly {
			continue
		}
		if _, mounted := t.At(other); !mounted {
			continue
		}
		kind := "read-write"
		if p.ReadOnly {
			kind = "read-only"
		}
		return status.Errorf(codes.FailedPrecondition,
			"block volume %q is published %s at %s: its device is read-only or writable as a whole, so it cannot also be published the other way on this node",
			rec.VolumeID, kind, other)
	}
	if err := blockdev.SetReadOnly(rec.DevicePath(), readOnly); err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	return nil
}

// isPublication reports whether mount m at target is a publication of
// the volume on devPath: the device node itself for a block volume, the
// root of its file system otherwise.
func isPublication(m mount.Info, target, devPath string, block bool) bool {
	if block {
		var a, b unix.Stat_t
		return unix.Stat(target, &a) == nil && unix.Stat(devPath, &b) == nil &&
			a.Mode&unix.S_IFMT == unix.S_IFBLK && a.Rdev == b.Rdev
	}
	maj, min, err := blockdev.Number(devPath)
	return err == nil && m.Major == maj && m.Minor == min && m.Root == "/"
}

// makeBlockTarget creates the file a block volume is bind-mounted on; the
// CO has made its parent directory.
func makeBlockTarget(target string) error {
	st, err := os.Lstat(target)
	switch {
	case err == nil && st.IsDir():
		// Some COs make a directory; a device needs a file.
		if err := os.Remove(target); err != nil {
			return status.Errorf(codes.Internal, "target path %s is a directory that cannot be replaced by a file: %v", target, err)
		}
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return status.Errorf(codes.Internal, "target path: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(target)); err != nil {
		return status.Errorf(codes.FailedPrecondition, "the parent of the target path does not exist: %v", err)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return status.Errorf(codes.Internal, "creating the target file: %v", err)
	}
	return f.Close()
}

func (n *NodeServer) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	target := req.GetTargetPath()
	if err := checkPath("target path", target); err != nil {
		return nil, err
	}
	unlock, err := n.lockVolume(id, target)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if v := n.volume(id); v != nil && n.stateOf(v).rec.StagingPath == target {
		return nil, status.Errorf(codes.InvalidArgument, "%s is the staging path of volume %q, not a target", target, id)
	}
	if err := mount.UnmountAll(target); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "removing the target path: %v", err)
	}
	if v := n.volume(id); v != nil {
		s := n.stateOf(v)
		if p, ok := s.rec.Published[target]; ok {
			if err := n.update(v, func(r *nodestate.Record) { delete(r.Published, target) }); err != nil {
				return nil, err
			}
			if s.rec.Block && !s.rec.ReadOnly && p.ReadOnly && !hasReadOnlyPublication(&s.rec, target) && s.broken == nil {
				// The last reader is gone: the device may be written
				// again by the next publication.
				if err := blockdev.SetReadOnly(s.rec.DevicePath(), false); err != nil {
					return nil, status.Errorf(codes.Internal, "%v", err)
				}
			}
		}
	}
	n.log.Info("volume unpublished", "volumeID", id, "target", target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// hasReadOnlyPublication reports whether a volume has a read-only
// publication other than at target.
func hasReadOnlyPublication(rec *nodestate.Record, target string) bool {
	for other, p := range rec.Published {
		if other != target && p.ReadOnly {
			return true
		}
	}
	return false
}
