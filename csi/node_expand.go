package csi

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi/internal/fstools"
	"github.com/purerbd/purerbd/nbd/kernel"
)

// NodeExpandVolume makes the kernel see the image's new size (the
// controller has grown the image) and grows the file system online.
func (n *NodeServer) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	path := req.GetVolumePath()
	if path == "" {
		return nil, status.Error(codes.InvalidArgument, "volume path is required")
	}
	cr := req.GetCapacityRange()
	reqBytes, limBytes := cr.GetRequiredBytes(), cr.GetLimitBytes()
	if reqBytes < 0 || limBytes < 0 || (limBytes > 0 && reqBytes > limBytes) {
		return nil, status.Errorf(codes.InvalidArgument, "capacity range [%d, %d] is not valid", reqBytes, limBytes)
	}
	unlock, err := n.lockVolume(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	v, s, err := n.volumeAt(id, path)
	if err != nil {
		return nil, err
	}
	if c := req.GetVolumeCapability(); c != nil && c.GetAccessType() != nil && (c.GetBlock() != nil) != s.rec.Block {
		return nil, status.Errorf(codes.InvalidArgument, "volume %q: %s", id, map[bool]string{true: "it is a block volume", false: "it is a file system volume"}[s.rec.Block])
	}
	if s.broken != nil {
		if err := n.recover(ctx, v, req.GetSecrets()); err != nil {
			return nil, err
		}
		s = n.stateOf(v)
	}
	if s.dev == nil || s.img == nil {
		return nil, status.Errorf(codes.Unavailable, "volume %q is not served by this process right now", id)
	}
	if r, ok := s.img.(imageRefresher); ok {
		if err := r.Refresh(ctx); err != nil {
			return nil, storeError(err, Credentials{}, "rereading the image of volume %q", id)
		}
	}
	size := s.img.Size() &^ (kernel.DefaultBlockSize - 1)
	if reqBytes > size {
		return nil, status.Errorf(codes.OutOfRange, "the image of volume %q is %d bytes, less than the required %d: expand it with ControllerExpandVolume first", id, size, reqBytes)
	}
	if limBytes > 0 && size > limBytes {
		return nil, status.Errorf(codes.OutOfRange, "the image of volume %q is %d bytes, over the limit of %d", id, size, limBytes)
	}
	start := time.Now()
	if err := s.dev.Resize(ctx, size); err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err // FAILED_PRECONDITION: a ublk device this kernel cannot grow
		}
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if !s.rec.Block {
		if s.rec.ReadOnly {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %q is staged read-only: its file system cannot grow", id)
		}
		prog, args, err := fstools.GrowArgs(s.rec.FsType, s.rec.DevicePath(), s.rec.StagingPath)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if _, err := n.cfg.Tools.Run(ctx, prog, args...); err != nil {
			return nil, status.Errorf(codes.Internal, "growing the file system: %v", err)
		}
	}
	n.log.Info("volume expanded", "volumeID", id, "size", size, "duration", time.Since(start).Round(time.Millisecond))
	return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
}
