package csi

import (
	"context"
	"errors"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Snapshots. A CSI snapshot is an RBD snapshot of the source image,
// named snapshotNamePrefix + H(CSI name) (names.go). CreateSnapshot's
// steps:
//
//	create-snapshot/reserve   record snapshot name -> source image ID
//	create-snapshot/snapshot  take the RBD snapshot
//
// and DeleteSnapshot's:
//
//	delete-snapshot/remove     remove the RBD snapshot, or, if clones need
//	                           it, rename it to a tombstone
//	delete-snapshot/unreserve  drop the reservation
//	delete-snapshot/cascade    remove the source image if it is a
//	                           tombstone and this was its last snapshot
//
// A reservation whose snapshot is gone is stale and may be taken over, so
// a crash between the steps never blocks a name.

// reservationKey is the reservation-table key of an RBD snapshot name.
func reservationKey(snap string) string { return "csi.snap." + snap }

type snapshotRequest struct {
	name    string
	source  string // source volume ID
	src     ImageRef
	snap    string
	cluster Cluster
}

// ensureSnapshot makes the snapshot for r exist.
func (d *Driver) ensureSnapshot(ctx context.Context, s Session, cred Credentials, r snapshotRequest) (*csi.Snapshot, error) {
	o, err := ownedVolume(ctx, s, r.src)
	if err != nil {
		return nil, storeError(err, cred, "source volume %q", r.source)
	}
	info := o.info
	sid := SnapshotID{ClusterID: r.cluster.ID, Pool: r.src.Pool, Namespace: r.src.Namespace, ImageID: info.ID, Snap: r.snap}
	id, err := sid.Encode()
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	key := reservationKey(r.snap)
	owner, err := s.Reservation(ctx, r.src.Pool, r.src.Namespace, key)
	switch {
	case errors.Is(err, ErrNotFound):
		owner = ""
	case err != nil:
		return nil, storeError(err, cred, "reservation of snapshot %q", r.name)
	}
	if owner != "" && owner != info.ID {
		other := SnapshotID{ClusterID: r.cluster.ID, Pool: r.src.Pool, Namespace: r.src.Namespace, ImageID: owner, Snap: r.snap}
		switch _, _, err := findSnapshot(ctx, s, other, cred); {
		case err == nil:
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %q already exists with another source volume", r.name)
		case status.Code(err) != codes.NotFound:
			return nil, err
		}
		d.log.Info("taking over a stale snapshot reservation", "snapshot", r.name, "oldImageID", owner)
	}
	if owner != info.ID {
		if err := d.step("create-snapshot/reserve"); err != nil {
			return nil, err
		}
		if err := s.SetReservation(ctx, r.src.Pool, r.src.Namespace, key, info.ID); err != nil {
			return nil, storeError(err, cred, "reserving snapshot %q", r.name)
		}
	}
	if _, sn, err := findSnapshot(ctx, s, sid, cred); err == nil {
		return snapshotMessage(id, r.source, sn), nil
	} else if status.Code(err) != codes.NotFound {
		return nil, err
	}
	if err := d.step("create-snapshot/snapshot"); err != nil {
		return nil, err
	}
	if err := s.CreateSnapshot(ctx, r.src, r.snap); err != nil && !errors.Is(err, ErrExists) {
		return nil, storeError(err, cred, "snapshotting %s", r.src.Name)
	}
	_, sn, err := findSnapshot(ctx, s, sid, cred)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "snapshot %q vanished after creation: %v", r.name, errorMessage(err))
	}
	return snapshotMessage(id, r.source, sn), nil
}

func snapshotMessage(id, sourceVolumeID string, sn SnapInfo) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:     id,
		SourceVolumeId: sourceVolumeID,
		SizeBytes:      int64(sn.Size),
		CreationTime:   timestamppb.New(sn.Created),
		ReadyToUse:     true,
	}
}

// removeSnapshot deletes the snapshot sid names; a snapshot already gone
// is not an error.
func (d *Driver) removeSnapshot(ctx context.Context, s Session, cred Credentials, cluster Cluster, sid SnapshotID) error {
	key := reservationKey(sid.Snap)
	unreserve := func() error {
		owner, err := s.Reservation(ctx, sid.Pool, sid.Namespace, key)
		if errors.Is(err, ErrNotFound) || (err == nil && owner != sid.ImageID) {
			return nil
		}
		if err != nil {
			return storeError(err, cred, "reservation of snapshot %s", sid.Snap)
		}
		if err := d.step("delete-snapshot/unreserve"); err != nil {
			return err
		}
		if err := s.RemoveReservation(ctx, sid.Pool, sid.Namespace, key); err != nil {
			return storeError(err, cred, "reservation of snapshot %s", sid.Snap)
		}
		return nil
	}
	o, sn, err := findSnapshot(ctx, s, sid, cred)
	if status.Code(err) == codes.NotFound {
		return unreserve()
	}
	if err != nil {
		return err
	}
	img := o.ref
	unlock, err := d.lockImages(ctx, s, cluster.ID, img)
	if err != nil {
		return err
	}
	defer unlock()
	if err := d.step("delete-snapshot/remove"); err != nil {
		return err
	}
	removed := true
	switch err := s.RemoveSnapshot(ctx, img, sid.Snap); {
	case errors.Is(err, ErrBusy):
		removed = false
		to := snapTombstone(sid.Snap, sn.ID)
		if err := s.RenameSnapshot(ctx, img, sid.Snap, to); err != nil {
			return storeError(err, cred, "renaming snapshot %s@%s", img.Name, sid.Snap)
		}
		d.log.Info("snapshot deleted; kept as a tombstone until its clones go", "image", img.Name, "snapshot", to)
	case err != nil && !errors.Is(err, ErrNotFound):
		return storeError(err, cred, "removing snapshot %s@%s", img.Name, sid.Snap)
	}
	if err := unreserve(); err != nil {
		return err
	}
	if removed && o.tomb {
		if err := d.step("delete-snapshot/cascade"); err != nil {
			return err
		}
		return d.retire(ctx, s, cred, o)
	}
	return nil
}

// snapshotEntry describes a live snapshot for GetSnapshot and
// ListSnapshots.
func snapshotEntry(cluster Cluster, pool int64, ns string, info ImageInfo, sn SnapInfo) (*csi.Snapshot, bool) {
	id, err := SnapshotID{ClusterID: cluster.ID, Pool: pool, Namespace: ns, ImageID: info.ID, Snap: sn.Name}.Encode()
	if err != nil {
		return nil, false
	}
	src := VolumeID{ClusterID: cluster.ID, Pool: pool, Namespace: ns, Image: liveName(info.Name)}.String()
	msg := snapshotMessage(id, src, sn)
	if g := sn.Group; g != nil {
		msg.GroupSnapshotId = GroupSnapshotID{ClusterID: cluster.ID, Pool: g.Group.Pool, Namespace: g.Group.Namespace, Group: g.Group.Name}.String()
	}
	return msg, true
}
