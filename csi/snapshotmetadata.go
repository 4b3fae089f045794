package csi

import (
	"context"
	"errors"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Changed-block tracking for backup tools: CSI's SnapshotMetadata
// service, on the controller. GetMetadataAllocated lists the ranges of a
// snapshot that hold data, GetMetadataDelta those that changed between
// two snapshots of the same volume, as `rbd diff` (and `rbd diff
// --from-snap`) lists them: from the object maps with fast-diff, from
// the objects' snapshot lists otherwise, so it works on every Ceph
// release. Ranges are variable-length, in offset order, from the
// request's starting offset.

// defaultMaxResults is how many ranges one response carries when the
// request leaves it to the plugin.
const defaultMaxResults = 256

type snapshotMetadata struct {
	csi.UnimplementedSnapshotMetadataServer
	d *Driver
}

// extentStream sends ranges in batches of max.
type extentStream struct {
	max  int
	size uint64
	buf  []*csi.BlockMetadata
	send func(size uint64, b []*csi.BlockMetadata) error
}

func (e *extentStream) add(off, length uint64) error {
	e.buf = append(e.buf, &csi.BlockMetadata{ByteOffset: int64(off), SizeBytes: int64(length)})
	if len(e.buf) < e.max {
		return nil
	}
	return e.flush()
}

func (e *extentStream) flush() error {
	if len(e.buf) == 0 {
		return nil
	}
	err := e.send(e.size, e.buf)
	e.buf = nil
	return err
}

// checkPaging checks a request's starting offset and batch size.
func checkPaging(start int64, maxResults int32) (int, error) {
	if start < 0 {
		return 0, status.Error(codes.InvalidArgument, "starting offset is negative")
	}
	switch {
	case maxResults < 0:
		return 0, status.Error(codes.InvalidArgument, "max results is negative")
	case maxResults == 0:
		return defaultMaxResults, nil
	}
	return int(maxResults), nil
}

// nativeSnapshot parses a snapshot handle for the service: a snapshot
// the driver made (a ceph-csi snapshot is an image of its own, whose
// changes the service does not track).
func nativeSnapshot(id, what string) (SnapshotID, error) {
	if id == "" {
		return SnapshotID{}, status.Errorf(codes.InvalidArgument, "%s is required", what)
	}
	h, err := parseSnapshotHandle(id)
	if err != nil {
		return SnapshotID{}, status.Errorf(codes.NotFound, "snapshot %q not found: %v", id, err)
	}
	if h.cephcsi != nil {
		return SnapshotID{}, status.Errorf(codes.FailedPrecondition, "snapshot %q is a ceph-csi snapshot (an image of its own): its changed blocks are not tracked", id)
	}
	return h.native, nil
}

// snapshotExtents streams the ranges of target (or those changed since
// base) from start.
func (m *snapshotMetadata) snapshotExtents(ctx context.Context, secrets map[string]string, base *SnapshotID, target SnapshotID,
	start int64, maxResults int32, send func(size uint64, b []*csi.BlockMetadata) error) error {
	max, err := checkPaging(start, maxResults)
	if err != nil {
		return err
	}
	_, cred, s, err := m.d.open(ctx, target.ClusterID, secrets, reading)
	if err != nil {
		return err
	}
	_, targetInfo, err := findSnapshot(ctx, s, target, cred)
	if err != nil {
		return err
	}
	from := ""
	if base != nil {
		_, baseInfo, err := findSnapshot(ctx, s, *base, cred)
		if err != nil {
			return err
		}
		if baseInfo.ID >= targetInfo.ID {
			return status.Errorf(codes.InvalidArgument, "base snapshot %s was taken after target snapshot %s", base, target)
		}
		from = base.Snap
	}
	if uint64(start) >= targetInfo.Size {
		return status.Errorf(codes.OutOfRange, "starting offset %d is not below the snapshot's size %d", start, targetInfo.Size)
	}
	out := &extentStream{max: max, size: targetInfo.Size, send: send}
	img := ImageRef{Pool: target.Pool, Namespace: target.Namespace, ID: target.ImageID}
	size, err := s.SnapshotExtents(ctx, img, from, target.Snap, uint64(start), out.add)
	var se streamError
	switch {
	case errors.As(err, &se):
		return se.err
	case err != nil:
		return storeError(err, cred, "snapshot %s", target)
	}
	out.size = size
	return out.flush()
}

// streamError marks an error of the gRPC stream (the client went away),
// passed through as it is.
type streamError struct{ err error }

func (e streamError) Error() string { return e.err.Error() }

func (m *snapshotMetadata) GetMetadataAllocated(req *csi.GetMetadataAllocatedRequest, stream csi.SnapshotMetadata_GetMetadataAllocatedServer) error {
	target, err := nativeSnapshot(req.GetSnapshotId(), "snapshot ID")
	if err != nil {
		return err
	}
	return m.snapshotExtents(stream.Context(), req.GetSecrets(), nil, target, req.GetStartingOffset(), req.GetMaxResults(),
		func(size uint64, b []*csi.BlockMetadata) error {
			if err := stream.Send(&csi.GetMetadataAllocatedResponse{BlockMetadataType: csi.BlockMetadataType_VARIABLE_LENGTH,
				VolumeCapacityBytes: int64(size), BlockMetadata: b}); err != nil {
				return streamError{fmt.Errorf("sending allocated ranges: %w", err)}
			}
			return nil
		})
}

func (m *snapshotMetadata) GetMetadataDelta(req *csi.GetMetadataDeltaRequest, stream csi.SnapshotMetadata_GetMetadataDeltaServer) error {
	base, err := nativeSnapshot(req.GetBaseSnapshotId(), "base snapshot ID")
	if err != nil {
		return err
	}
	target, err := nativeSnapshot(req.GetTargetSnapshotId(), "target snapshot ID")
	if err != nil {
		return err
	}
	if base.ClusterID != target.ClusterID || base.Pool != target.Pool || base.Namespace != target.Namespace || base.ImageID != target.ImageID {
		return status.Errorf(codes.InvalidArgument, "base snapshot %s and target snapshot %s are not of the same volume", base, target)
	}
	return m.snapshotExtents(stream.Context(), req.GetSecrets(), &base, target, req.GetStartingOffset(), req.GetMaxResults(),
		func(size uint64, b []*csi.BlockMetadata) error {
			if err := stream.Send(&csi.GetMetadataDeltaResponse{BlockMetadataType: csi.BlockMetadataType_VARIABLE_LENGTH,
				VolumeCapacityBytes: int64(size), BlockMetadata: b}); err != nil {
				return streamError{fmt.Errorf("sending changed ranges: %w", err)}
			}
			return nil
		})
}
