package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// healthCheckTimeout bounds the cluster round trip of a health check.
const healthCheckTimeout = 5 * time.Second

// volumeAt returns the staged volume id if path is its staging path or
// one of its targets; NOT_FOUND otherwise.
func (n *NodeServer) volumeAt(id, path string) (*nodeVolume, volumeState, error) {
	v := n.volume(id)
	if v == nil {
		return nil, volumeState{}, status.Errorf(codes.NotFound, "volume %q is not staged on this node", id)
	}
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		// No volume can be there.
		return nil, volumeState{}, status.Errorf(codes.NotFound, "volume %q is not at %q, which is not a clean absolute path", id, path)
	}
	s := n.stateOf(v)
	if _, published := s.rec.Published[path]; path != s.rec.StagingPath && !published {
		return nil, volumeState{}, status.Errorf(codes.NotFound, "volume %q is neither staged nor published at %s", id, path)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, volumeState{}, status.Errorf(codes.NotFound, "%s does not exist", path)
	}
	return v, s, nil
}

func (n *NodeServer) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	path := req.GetVolumePath()
	if path == "" {
		return nil, status.Error(codes.InvalidArgument, "volume path is required")
	}
	_, s, err := n.volumeAt(id, path)
	if err != nil {
		return nil, err
	}
	if s.rec.Block {
		size, err := deviceSize(&s.rec)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "size of %s: %v", s.rec.DevicePath(), err)
		}
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Total: size, Unit: csi.VolumeUsage_BYTES}}}, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs %s: %v", path, err)
	}
	bs := st.Bsize
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{
			Unit:      csi.VolumeUsage_BYTES,
			Total:     int64(st.Blocks) * bs,
			Available: int64(st.Bavail) * bs,
			Used:      int64(st.Blocks-st.Bfree) * bs,
		},
		{
			Unit:      csi.VolumeUsage_INODES,
			Total:     int64(st.Files),
			Available: int64(st.Ffree),
			Used:      int64(st.Files - st.Ffree),
		},
	}}, nil
}

// NodeGetVolumeHealth reports a staged volume INACCESSIBLE when this
// process does not serve it (a takeover after a restart failed, or it
// waits for credentials), when its device has lost its connections or
// no longer carries the volume, or when the cluster does not answer;
// in the first two cases the kernel holds the volume's I/O (until the
// reattach timeout fails it), and the messages say so. A single-writer
// volume whose image's exclusive lock another client holds is DEGRADED:
// its writes wait until the lock comes back.
//
// This is the volume health the kubelet reads: CSI 1.13 removed
// VolumeCondition from NodeGetVolumeStats (and the VOLUME_CONDITION
// capability) in favour of this call.
func (n *NodeServer) NodeGetVolumeHealth(ctx context.Context, req *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	v := n.volume(id)
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %q is not staged on this node", id)
	}
	for _, p := range []string{req.GetStagingTargetPath(), req.GetVolumePublishPath()} {
		if p != "" {
			if _, _, err := n.volumeAt(id, p); err != nil {
				return nil, err
			}
		}
	}
	s := n.stateOf(v)
	var entries []*csi.VolumeHealth_VolumeHealthEntry
	bad := func(reason, msg string) {
		entries = append(entries, &csi.VolumeHealth_VolumeHealthEntry{
			Status: csi.VolumeHealthErrorType_INACCESSIBLE, Reason: reason, Message: msg})
	}
	held := fmt.Sprintf("the kernel holds its I/O for up to %v, then fails it", n.nbdTimeouts(&s.rec).reattach)
	if s.rec.Ublk() {
		held = "the kernel holds its I/O until a plugin takes the device over"
	}
	switch {
	case s.broken != nil:
		bad("NotServed", fmt.Sprintf("not served by the plugin (%s): %s", held, errorMessage(s.broken)))
	case s.dev == nil:
		bad("NotServed", fmt.Sprintf("no device is served for the volume (%s)", held))
	default:
		select {
		case <-s.dev.Done():
			if s.rec.Ublk() {
				bad("DeviceDisconnected", fmt.Sprintf("the queues of %s ended (%v) (%s)", s.dev.Path(), s.dev.Err(), held))
			} else {
				bad("DeviceDisconnected", fmt.Sprintf("the kernel dropped every connection of %s; the plugin is reattaching it (%s)", s.dev.Path(), held))
			}
		default:
		}
		if !deviceCarriesVolume(&s.rec) {
			bad("DeviceGone", fmt.Sprintf("%s no longer carries the volume", s.rec.DevicePath()))
		}
		if r, ok := s.img.(imageRefresher); ok {
			cctx, cancel := context.WithTimeout(ctx, healthCheckTimeout)
			err := r.Refresh(cctx)
			cancel()
			if err != nil {
				bad("ClusterUnreachable", fmt.Sprintf("reading the image header: %v", err))
			}
		}
		if e := n.lockElsewhere(ctx, s); e != nil {
			entries = append(entries, e)
		}
	}
	return &csi.NodeGetVolumeHealthResponse{VolumeHealth: &csi.VolumeHealth{VolumeId: id, HealthStatuses: entries}}, nil
}

// lockHolderLister is implemented by node images that can tell who
// holds their exclusive lock (package csi/rbdstore's).
type lockHolderLister interface {
	// LockHolders lists the clients other than this one that hold the
	// image's exclusive lock.
	LockHolders(ctx context.Context) ([]string, error)
}

// lockElsewhere returns a DEGRADED entry when a single writer's image
// lock is held by another client: the node's writes wait for it (the
// lock is cooperative: a snapshot or resize holds it for a moment, a
// client that refuses to hand it over holds them up for good).
func (n *NodeServer) lockElsewhere(ctx context.Context, s volumeState) *csi.VolumeHealth_VolumeHealthEntry {
	if !s.rec.Exclusive || s.rec.ReadOnly {
		return nil
	}
	r, ok := s.img.(lockReporter)
	if !ok {
		return nil
	}
	if st, ok := r.LockState(); !ok || st.Owner {
		return nil
	}
	l, ok := s.img.(lockHolderLister)
	if !ok {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, healthCheckTimeout)
	defer cancel()
	holders, err := l.LockHolders(cctx)
	if err != nil || len(holders) == 0 {
		return nil // an unreachable cluster is reported by the header check
	}
	return &csi.VolumeHealth_VolumeHealthEntry{
		Status: csi.VolumeHealthErrorType_DEGRADED,
		Reason: "LockHeldElsewhere",
		Message: fmt.Sprintf("the image's exclusive lock is held by %s: the volume's writes wait until it is handed back",
			strings.Join(holders, ", ")),
	}
}
