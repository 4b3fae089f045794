package csi

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Volume group snapshots (the GroupController service). A
// VolumeGroupSnapshot of name N is an RBD group named groupPrefix + H(N)
// in the pool of the first source volume, carrying one group snapshot of
// the same name: a crash-consistent snapshot of every source, taken while
// writes to all of them are held back. The sources are members of the
// group only while the snapshot is cut, so that a volume can be in the
// next group snapshot and DeleteVolume is not blocked by a membership;
// the group and its snapshot record stay, as `rbd group snap ls` shows
// them. RBD groups take members of their own RADOS namespace only, so
// the sources must share one.
//
// CreateVolumeGroupSnapshot's steps:
//
//	create-group-snapshot/reserve   record group name -> CSI name (ownership)
//	create-group-snapshot/group     create the group
//	create-group-snapshot/add       add the sources to it
//	create-group-snapshot/snapshot  take the group snapshot
//	create-group-snapshot/release   remove the sources from the group
//
// A failure before the snapshot is cut removes what was made; a crash
// leaves at worst an incomplete group snapshot, which the retry removes
// before it takes the snapshot again. A call that is never retried
// leaves its group to Sweep (groupsweep.go); the next group snapshot of
// one of its sources sweeps it at once, and DeleteVolume takes a source
// out of it. DeleteVolumeGroupSnapshot's:
//
//	delete-group-snapshot/remove     remove the group snapshot and its member snapshots
//	delete-group-snapshot/group      remove the group
//	delete-group-snapshot/unreserve  drop the reservation
//
// after which source volumes deleted meanwhile (tombstones kept for these
// snapshots) are removed. A member snapshot that clones still need goes
// to RBD's snapshot trash, as librbd does, and with its last clone.
//
// A member snapshot is a CSI snapshot too: its ID is an ordinary
// snapshot ID whose snapshot name is the member's name in RBD's group
// snapshot namespace (".group.POOL_GROUPID_GROUPSNAPID"); GetSnapshot,
// ListSnapshots and CreateVolume take it, DeleteSnapshot refuses it.

const (
	defaultGroupPrefix = "csi-vgs-"
	groupMemberPrefix  = ".group."
)

func groupName(prefix, csiName string) string { return prefix + nameHash(csiName) }

// groupReservationKey records which CSI name a group was made for: the
// proof, as metaName is for images, that the group is the driver's.
func groupReservationKey(group string) string { return "csi.group." + group }

// isGroupMemberSnap tells whether a snapshot name is one librbd gives
// the member snapshots of group snapshots.
func isGroupMemberSnap(name string) bool { return strings.HasPrefix(name, groupMemberPrefix) }

// ensureGroupSnapshot makes group carry a complete group snapshot of
// exactly srcs and returns it.
func (d *Driver) ensureGroupSnapshot(ctx context.Context, s Session, cred Credentials, cluster, name string, g GroupRef, srcs []groupSource) (GroupSnapInfo, error) {
	key := groupReservationKey(g.Name)
	switch owner, err := s.Reservation(ctx, g.Pool, g.Namespace, key); {
	case errors.Is(err, ErrNotFound):
		if err := d.step("create-group-snapshot/reserve"); err != nil {
			return GroupSnapInfo{}, err
		}
		if err := s.SetReservation(ctx, g.Pool, g.Namespace, key, name); err != nil {
			return GroupSnapInfo{}, storeError(err, cred, "reserving group %s", g.Name)
		}
	case err != nil:
		return GroupSnapInfo{}, storeError(err, cred, "reservation of group %s", g.Name)
	case owner != name:
		return GroupSnapInfo{}, status.Errorf(codes.AlreadyExists, "group %s belongs to volume group snapshot %q", g.Name, owner)
	}
	want := make([]string, len(srcs))
	for i, src := range srcs {
		want[i] = imageIDKey(src.own.ref.Pool, src.own.info.ID)
	}
	slices.Sort(want)
	gs, found, err := groupSnapshotOf(ctx, s, g)
	if err != nil {
		return gs, storeError(err, cred, "group %s", g.Name)
	}
	switch {
	case found && gs.Complete:
		if !slices.Equal(memberKeys(gs), want) {
			return gs, status.Errorf(codes.AlreadyExists, "volume group snapshot %q exists with other source volumes", name)
		}
		// A crash before the release step left the sources members.
		if err := d.releaseMembers(ctx, s, cred, g); err != nil {
			return gs, err
		}
		return gs, nil
	case found:
		d.log.Info("removing an incomplete group snapshot left by an interrupted attempt", "group", g.Name)
		if err := s.RemoveGroupSnapshot(ctx, g, g.Name); err != nil && !errors.Is(err, ErrNotFound) {
			return gs, storeError(err, cred, "removing incomplete group snapshot %s", g.Name)
		}
	}
	if err := d.cutGroupSnapshot(ctx, s, cred, cluster, g, srcs); err != nil {
		return GroupSnapInfo{}, err
	}
	gs, found, err = groupSnapshotOf(ctx, s, g)
	if err == nil && !(found && gs.Complete) {
		err = status.Errorf(codes.Internal, "group snapshot %s vanished after creation", g.Name)
	}
	return gs, storeError(err, cred, "group %s", g.Name)
}

// cutGroupSnapshot makes the group with srcs as its members, snapshots
// it and releases the members. A failure before the snapshot exists
// removes the group again.
func (d *Driver) cutGroupSnapshot(ctx context.Context, s Session, cred Credentials, cluster string, g GroupRef, srcs []groupSource) (err error) {
	defer func() {
		if err == nil {
			return
		}
		if cerr := d.dropGroup(context.WithoutCancel(ctx), s, g); cerr != nil {
			d.log.Warn("cleaning up after a failed group snapshot", "group", g.Name, "error", redact(cerr.Error(), cred))
		}
	}()
	if err := d.step("create-group-snapshot/group"); err != nil {
		return err
	}
	if err := s.CreateGroup(ctx, g); err != nil && !errors.Is(err, ErrExists) {
		return storeError(err, cred, "creating group %s", g.Name)
	}
	// Members an earlier attempt with other sources left go first.
	members, err := s.GroupImages(ctx, g)
	if err != nil {
		return storeError(err, cred, "members of group %s", g.Name)
	}
	for _, m := range members {
		if !slices.ContainsFunc(srcs, func(src groupSource) bool { return src.own.ref.Pool == m.Pool && src.own.info.ID == m.ID }) {
			if err := s.RemoveGroupImage(ctx, g, ImageRef{Pool: m.Pool, Namespace: m.Namespace, ID: m.ID}); err != nil && !errors.Is(err, ErrNotFound) {
				return storeError(err, cred, "removing image %s from group %s", m.Name, g.Name)
			}
		}
	}
	for _, src := range srcs {
		if err := d.step("create-group-snapshot/add"); err != nil {
			return err
		}
		err := s.AddGroupImage(ctx, g, src.own.ref)
		if errors.Is(err, ErrInGroup) && d.sweepGroupOf(ctx, s, cred, cluster, src.own.ref) {
			err = s.AddGroupImage(ctx, g, src.own.ref)
		}
		if err != nil {
			if errors.Is(err, ErrInGroup) {
				return status.Errorf(codes.FailedPrecondition, "source volume %q belongs to another RBD group: %s", src.id, redact(err.Error(), cred))
			}
			return storeError(err, cred, "adding source volume %q to group %s", src.id, g.Name)
		}
	}
	if err := d.step("create-group-snapshot/snapshot"); err != nil {
		return err
	}
	if err := s.CreateGroupSnapshot(ctx, g, g.Name); err != nil && !errors.Is(err, ErrExists) {
		return storeError(err, cred, "snapshotting group %s", g.Name)
	}
	// The snapshot is cut: from here on a failure leaves it (dropGroup
	// keeps a complete one) for the retry, which finds it complete and
	// releases the members then.
	if err := d.step("create-group-snapshot/release"); err != nil {
		return err
	}
	return d.releaseMembers(ctx, s, cred, g)
}

// dropGroup undoes a group snapshot that failed before it was cut:
// the group (with any incomplete snapshot and its members' links).
func (d *Driver) dropGroup(ctx context.Context, s Session, g GroupRef) error {
	if gs, found, err := groupSnapshotOf(ctx, s, g); err == nil && found && gs.Complete {
		return nil // cut after all: keep it
	}
	if err := s.RemoveGroup(ctx, g); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return s.RemoveReservation(ctx, g.Pool, g.Namespace, groupReservationKey(g.Name))
}

// releaseMembers removes every member from the group.
func (d *Driver) releaseMembers(ctx context.Context, s Session, cred Credentials, g GroupRef) error {
	members, err := s.GroupImages(ctx, g)
	if err != nil {
		return storeError(err, cred, "members of group %s", g.Name)
	}
	for _, m := range members {
		if err := s.RemoveGroupImage(ctx, g, ImageRef{Pool: m.Pool, Namespace: m.Namespace, ID: m.ID}); err != nil && !errors.Is(err, ErrNotFound) {
			return storeError(err, cred, "removing image %s from group %s", m.Name, g.Name)
		}
	}
	return nil
}

// groupSnapshotOf returns the group snapshot named as its group; found
// is false when there is none or no group.
func groupSnapshotOf(ctx context.Context, s Session, g GroupRef) (GroupSnapInfo, bool, error) {
	snaps, err := s.GroupSnapshots(ctx, g)
	if errors.Is(err, ErrNotFound) {
		return GroupSnapInfo{}, false, nil
	}
	if err != nil {
		return GroupSnapInfo{}, false, err
	}
	for _, gs := range snaps {
		if gs.Name == g.Name {
			return gs, true, nil
		}
	}
	return GroupSnapInfo{}, false, nil
}

func memberKeys(gs GroupSnapInfo) []string {
	keys := make([]string, len(gs.Members))
	for i, m := range gs.Members {
		keys[i] = imageIDKey(m.Pool, m.ImageID)
	}
	slices.Sort(keys)
	return keys
}

// ownedGroup tells whether a group is the driver's: its name is a
// managed one and the reservation table records the CSI name it was
// made for.
func ownedGroup(ctx context.Context, s Session, g GroupRef) (bool, error) {
	if !isManagedName(g.Name) {
		return false, nil
	}
	name, err := s.Reservation(ctx, g.Pool, g.Namespace, groupReservationKey(g.Name))
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return nameHash(name) == g.Name[len(g.Name)-hashLen:], nil
}

// findGroupSnapshot returns the complete group snapshot an ID names;
// NOT_FOUND when there is none or it is not the driver's.
func findGroupSnapshot(ctx context.Context, s Session, cred Credentials, gid GroupSnapshotID) (GroupSnapInfo, error) {
	g := gid.ref()
	ok, err := ownedGroup(ctx, s, g)
	if err != nil {
		return GroupSnapInfo{}, storeError(err, cred, "group %s", g.Name)
	}
	if !ok {
		return GroupSnapInfo{}, status.Errorf(codes.NotFound, "volume group snapshot %s not found", gid)
	}
	gs, found, err := groupSnapshotOf(ctx, s, g)
	if err != nil {
		return gs, storeError(err, cred, "group %s", g.Name)
	}
	if !found || !gs.Complete {
		return gs, status.Errorf(codes.NotFound, "volume group snapshot %s not found", gid)
	}
	return gs, nil
}

// groupSnapshotMessage describes a group snapshot; sources maps member
// images (imageIDKey) to the source volume IDs the CO used, if known.
func (d *Driver) groupSnapshotMessage(ctx context.Context, s Session, cred Credentials, cl Cluster, id string, g GroupRef, gs GroupSnapInfo, sources map[string]string) (*csi.VolumeGroupSnapshot, error) {
	vgs := &csi.VolumeGroupSnapshot{GroupSnapshotId: id, ReadyToUse: true}
	var created time.Time
	for _, m := range gs.Members {
		snap, err := d.memberSnapshot(ctx, s, cred, cl, g, m)
		if err != nil {
			return nil, err
		}
		if src, ok := sources[imageIDKey(m.Pool, m.ImageID)]; ok {
			snap.SourceVolumeId = src
		}
		if t := snap.GetCreationTime().AsTime(); created.IsZero() || t.Before(created) {
			created = t
		}
		vgs.Snapshots = append(vgs.Snapshots, snap)
	}
	vgs.CreationTime = timestamppb.New(created)
	return vgs, nil
}

// memberSnapshot describes one member snapshot of a group snapshot.
func (d *Driver) memberSnapshot(ctx context.Context, s Session, cred Credentials, cl Cluster, g GroupRef, m GroupSnapMember) (*csi.Snapshot, error) {
	o, err := ownedImage(ctx, s, ImageRef{Pool: m.Pool, Namespace: g.Namespace, ID: m.ImageID})
	if err != nil {
		return nil, storeError(err, cred, "member image %s of group %s", m.ImageID, g.Name)
	}
	snaps, err := s.GroupMemberSnapshots(ctx, o.ref)
	if err != nil {
		return nil, storeError(err, cred, "snapshots of %s", o.info.Name)
	}
	for _, sn := range snaps {
		if sn.ID != m.SnapID {
			continue
		}
		sid := SnapshotID{ClusterID: cl.ID, Pool: m.Pool, Namespace: g.Namespace, ImageID: o.info.ID, Snap: sn.Name}
		if _, err := sid.Encode(); err != nil {
			return nil, errors.Join(errMemberIDTooLong, status.Errorf(codes.InvalidArgument, "the member snapshot of image %s in group %s: %v", o.info.Name, g.Name, err))
		}
		snap, ok := snapshotEntry(cl, m.Pool, g.Namespace, o.info, sn)
		if !ok {
			return nil, status.Errorf(codes.Internal, "member snapshot %s@%s has no valid snapshot ID", o.info.Name, sn.Name)
		}
		if e := o.cephcsi; e != nil && !e.Snapshot && e.Namespace == cl.Namespace {
			snap.SourceVolumeId = e.handle(cl)
		}
		return snap, nil
	}
	return nil, status.Errorf(codes.NotFound, "member snapshot %d of image %s is gone from group snapshot %s", m.SnapID, o.info.Name, g.Name)
}

// removeGroupSnapshot removes group snapshot gs (if found), the group
// and its reservation, holding the member images' locks so that no
// CreateVolume clones a member meanwhile.
func (d *Driver) removeGroupSnapshot(ctx context.Context, s Session, cred Credentials, cluster string, g GroupRef, gs GroupSnapInfo, found bool) error {
	var refs []ImageRef
	for _, m := range gs.Members {
		info, err := s.StatImage(ctx, ImageRef{Pool: m.Pool, Namespace: g.Namespace, ID: m.ImageID})
		if errors.Is(err, ErrNotFound) {
			continue // its snapshots went with it
		}
		if err != nil {
			return storeError(err, cred, "member image %s of group %s", m.ImageID, g.Name)
		}
		refs = append(refs, ImageRef{Pool: m.Pool, Namespace: g.Namespace, Name: info.Name})
	}
	unlock, err := d.lockImages(ctx, s, cluster, refs...)
	if err != nil {
		return err
	}
	defer unlock()
	if found {
		if err := d.step("delete-group-snapshot/remove"); err != nil {
			return err
		}
		if err := s.RemoveGroupSnapshot(ctx, g, g.Name); err != nil && !errors.Is(err, ErrNotFound) {
			return storeError(err, cred, "removing group snapshot %s", g.Name)
		}
	}
	if err := d.step("delete-group-snapshot/group"); err != nil {
		return err
	}
	if err := s.RemoveGroup(ctx, g); err != nil && !errors.Is(err, ErrNotFound) {
		return storeError(err, cred, "removing group %s", g.Name)
	}
	if err := d.step("delete-group-snapshot/unreserve"); err != nil {
		return err
	}
	if err := s.RemoveReservation(ctx, g.Pool, g.Namespace, groupReservationKey(g.Name)); err != nil {
		return storeError(err, cred, "reservation of group %s", g.Name)
	}
	return nil
}

// retireTombstone removes img if it is a tombstone of the driver's that
// nothing needs any more; best effort.
func (d *Driver) retireTombstone(ctx context.Context, s Session, cred Credentials, cluster string, img ImageRef) {
	o, err := ownedImage(ctx, s, img)
	if err != nil || !o.tomb {
		return
	}
	unlock, err := d.lockImages(ctx, s, cluster, o.ref)
	if err != nil {
		return // busy: Sweep will see to it
	}
	defer unlock()
	if err := d.retire(ctx, s, cred, o); err != nil {
		d.log.Info("tombstone stays", "image", o.info.Name, "error", errorMessage(err))
	}
}
