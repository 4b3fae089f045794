package csi

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Member snapshots of group snapshots, as the ordinary snapshot calls and
// DeleteVolume meet them.

// findMemberSnapshot is findSnapshot for a group snapshot's member: one
// of a complete group snapshot of the driver's, on an image it owns.
func findMemberSnapshot(ctx context.Context, s Session, sid SnapshotID, cred Credentials) (owner, SnapInfo, error) {
	o, err := ownedImage(ctx, s, ImageRef{Pool: sid.Pool, Namespace: sid.Namespace, ID: sid.ImageID})
	if err != nil {
		return owner{}, SnapInfo{}, storeError(err, cred, "snapshot %s", sid)
	}
	snaps, err := s.GroupMemberSnapshots(ctx, o.ref)
	if err != nil {
		return owner{}, SnapInfo{}, storeError(err, cred, "snapshot %s", sid)
	}
	for _, sn := range snaps {
		if sn.Name != sid.Snap {
			continue
		}
		ok, err := memberOfOwnedGroup(ctx, s, sn)
		if err != nil {
			return owner{}, SnapInfo{}, storeError(err, cred, "snapshot %s", sid)
		}
		if ok {
			return o, sn, nil
		}
	}
	return owner{}, SnapInfo{}, status.Errorf(codes.NotFound, "snapshot %s not found", sid)
}

// memberOfOwnedGroup tells whether a member snapshot belongs to a
// complete group snapshot of the driver's.
func memberOfOwnedGroup(ctx context.Context, s Session, sn SnapInfo) (bool, error) {
	if sn.Group == nil || sn.Group.GroupSnap != sn.Group.Group.Name {
		return false, nil
	}
	ok, err := ownedGroup(ctx, s, sn.Group.Group)
	if err != nil || !ok {
		return false, err
	}
	gs, found, err := groupSnapshotOf(ctx, s, sn.Group.Group)
	return found && gs.Complete && slices.ContainsFunc(gs.Members, func(m GroupSnapMember) bool { return m.SnapID == sn.ID }), err
}

// addMemberSnapshots adds an image's member snapshots of the driver's
// group snapshots, for ListSnapshots.
func (d *Driver) addMemberSnapshots(ctx context.Context, s Session, cred Credentials, cl Cluster, pool int64, ns string, info ImageInfo, add func(*csi.Snapshot)) error {
	snaps, err := s.GroupMemberSnapshots(ctx, ImageRef{Pool: pool, Namespace: ns, Name: info.Name})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return storeError(err, cred, "snapshots of %s", info.Name)
	}
	for _, sn := range snaps {
		ok, err := memberOfOwnedGroup(ctx, s, sn)
		if err != nil {
			return storeError(err, cred, "snapshot %s@%s", info.Name, sn.Name)
		}
		if !ok {
			continue
		}
		if snap, ok := snapshotEntry(cl, pool, ns, info, sn); ok {
			add(snap)
		}
	}
	return nil
}

// leaveInterruptedGroup handles an image DeleteVolume found in a group
// (removeErr): the driver's groups hold their sources only while a
// group snapshot is cut, under the images' locks, which the caller
// holds; so membership of one of them is what an interrupted
// CreateVolumeGroupSnapshot left, which the CO may never retry. The
// image leaves such a group and is removed again; one in another's
// group stays, and removeErr is returned.
func (d *Driver) leaveInterruptedGroup(ctx context.Context, s Session, cred Credentials, img ImageRef, removeErr error) error {
	g, ok, err := s.ImageGroup(ctx, img)
	if err != nil || !ok {
		return removeErr
	}
	if owned, err := ownedGroup(ctx, s, g); err != nil || !owned {
		return removeErr
	}
	d.log.Info("removing a deleted volume from the group an interrupted group snapshot left it in", "image", img.Name, "group", g.Name)
	if err := s.RemoveGroupImage(ctx, g, img); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("leaving group %s: %w", g.Name, err)
	}
	return s.RemoveImage(ctx, img)
}
