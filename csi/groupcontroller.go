package csi

import (
	"context"
	"errors"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The GroupController service: VolumeGroupSnapshots (groupsnapshots.go
// says how they map onto RBD groups).

type groupController struct {
	csi.UnimplementedGroupControllerServer
	d *Driver
}

func (c *groupController) GroupControllerGetCapabilities(context.Context, *csi.GroupControllerGetCapabilitiesRequest) (*csi.GroupControllerGetCapabilitiesResponse, error) {
	return &csi.GroupControllerGetCapabilitiesResponse{Capabilities: []*csi.GroupControllerServiceCapability{{
		Type: &csi.GroupControllerServiceCapability_Rpc{Rpc: &csi.GroupControllerServiceCapability_RPC{
			Type: csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT}}}}}, nil
}

// groupSource is one resolved source volume.
type groupSource struct {
	id  string // as the CO names it
	own owner
}

func (c *groupController) CreateVolumeGroupSnapshot(ctx context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	d := c.d
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	ids := req.GetSourceVolumeIds()
	if len(ids) == 0 {
		return nil, status.Error(codes.InvalidArgument, "source volume IDs are required")
	}
	p, err := parseSnapshotParams(req.GetParameters())
	if err != nil {
		return nil, err
	}
	prefix := p.Prefix
	if _, set := req.GetParameters()[paramSnapshotPrefix]; !set {
		prefix = defaultGroupPrefix
	}
	handles := make([]volumeHandle, len(ids))
	for i, id := range ids {
		if slices.Contains(ids[:i], id) {
			return nil, status.Errorf(codes.InvalidArgument, "source volume %q is listed twice", id)
		}
		h, err := parseVolumeHandle(id)
		if err != nil {
			return nil, status.Errorf(codes.NotFound, "source volume %q not found: %v", id, err)
		}
		if i > 0 && h.clusterID() != handles[0].clusterID() {
			return nil, status.Errorf(codes.InvalidArgument, "source volumes are in clusters %q and %q: a group snapshot is of one cluster", handles[0].clusterID(), h.clusterID())
		}
		handles[i] = h
	}
	clusterID := handles[0].clusterID()
	if p.ClusterID != "" && p.ClusterID != clusterID {
		return nil, status.Errorf(codes.InvalidArgument, "source volumes are in cluster %q, the group snapshot class names cluster %q", clusterID, p.ClusterID)
	}
	unlock, err := d.inFlight.lock(nameKey("group snapshot", req.GetName()))
	if err != nil {
		return nil, err
	}
	defer unlock()
	cl, cred, s, err := d.open(ctx, clusterID, req.GetSecrets(), changing)
	if err != nil {
		return nil, err
	}
	srcs := make([]groupSource, len(ids))
	refs := make([]ImageRef, len(ids))
	for i, h := range handles {
		vid, _, err := resolveVolume(ctx, s, cl, h)
		if err != nil {
			return nil, storeError(err, cred, "source volume %q", ids[i])
		}
		if i > 0 && vid.Namespace != refs[0].Namespace {
			return nil, status.Errorf(codes.FailedPrecondition, "source volumes are in RADOS namespaces %q and %q: an RBD group holds images of one namespace", refs[0].Namespace, vid.Namespace)
		}
		refs[i] = vid.ref()
		srcs[i].id = ids[i]
	}
	group := GroupRef{Pool: refs[0].Pool, Namespace: refs[0].Namespace, Name: groupName(prefix, req.GetName())}
	gid, err := GroupSnapshotID{ClusterID: cl.ID, Pool: group.Pool, Namespace: group.Namespace, Group: group.Name}.Encode()
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	release, err := d.lockGroup(ctx, s, cl.ID, group)
	if err != nil {
		return nil, err
	}
	defer release()
	unlockImages, err := d.lockImages(ctx, s, cl.ID, refs...)
	if err != nil {
		return nil, err
	}
	defer unlockImages()
	for i := range srcs {
		if srcs[i].own, err = ownedVolume(ctx, s, refs[i]); err != nil {
			return nil, storeError(err, cred, "source volume %q", ids[i])
		}
	}
	gs, err := d.ensureGroupSnapshot(ctx, s, cred, cl.ID, req.GetName(), group, srcs)
	if err != nil {
		return nil, err
	}
	byImage := map[string]string{}
	for _, src := range srcs {
		byImage[imageIDKey(src.own.ref.Pool, src.own.info.ID)] = src.id
	}
	vgs, err := d.groupSnapshotMessage(ctx, s, cred, cl, gid, group, gs, byImage)
	if errors.Is(err, errMemberIDTooLong) {
		// The member names are known only once the snapshot is cut; a
		// snapshot the CO cannot be given IDs for is of no use.
		if derr := s.RemoveGroup(context.WithoutCancel(ctx), group); derr != nil && !errors.Is(derr, ErrNotFound) {
			d.log.Warn("removing a group snapshot whose member IDs are too long", "group", group.Name, "error", redact(derr.Error(), cred))
		} else if derr := s.RemoveReservation(context.WithoutCancel(ctx), group.Pool, group.Namespace, groupReservationKey(group.Name)); derr != nil {
			d.log.Warn("removing the reservation of a discarded group", "group", group.Name, "error", redact(derr.Error(), cred))
		}
		return nil, status.Error(codes.InvalidArgument, errorMessage(err))
	}
	if err != nil {
		return nil, err
	}
	return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: vgs}, nil
}

// errMemberIDTooLong marks a member snapshot whose snapshot ID would not
// fit the CSI limit.
var errMemberIDTooLong = errors.New("member snapshot ID too long")

func imageIDKey(pool int64, id string) string { return itoa(pool) + "/" + id }

// lockGroup takes the controller replicas' operation lock of a group.
func (d *Driver) lockGroup(ctx context.Context, s Session, cluster string, g GroupRef) (func(), error) {
	key := "group " + cluster + "/" + itoa(g.Pool) + "/" + g.Namespace + "/" + g.Name
	release, err := s.LockOperation(ctx, g.Pool, g.Namespace, key)
	if errors.Is(err, ErrNotFound) {
		return nil, status.Errorf(codes.NotFound, "group %s: %v", key, err)
	}
	if errors.Is(err, ErrBusy) {
		return nil, status.Errorf(codes.Aborted, "an operation on %s is already in progress in another controller replica", key)
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "taking the operation lock of %s: %v", key, err)
	}
	return release, nil
}

// sameSnapshotIDs compares the snapshot IDs a request lists with a
// group snapshot's members.
func sameSnapshotIDs(listed []string, vgs *csi.VolumeGroupSnapshot) bool {
	have := make([]string, len(vgs.GetSnapshots()))
	for i, sn := range vgs.GetSnapshots() {
		have[i] = sn.GetSnapshotId()
	}
	want := slices.Clone(listed)
	slices.Sort(have)
	slices.Sort(want)
	return slices.Equal(have, want)
}

func (c *groupController) GetVolumeGroupSnapshot(ctx context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	d := c.d
	if req.GetGroupSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "group snapshot ID is required")
	}
	gid, err := ParseGroupSnapshotID(req.GetGroupSnapshotId())
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "volume group snapshot %q not found: %v", req.GetGroupSnapshotId(), err)
	}
	cl, cred, s, err := d.open(ctx, gid.ClusterID, req.GetSecrets(), reading)
	if err != nil {
		return nil, err
	}
	gs, err := findGroupSnapshot(ctx, s, cred, gid)
	if err != nil {
		return nil, err
	}
	vgs, err := d.groupSnapshotMessage(ctx, s, cred, cl, req.GetGroupSnapshotId(), gid.ref(), gs, nil)
	if err != nil {
		return nil, err
	}
	if len(req.GetSnapshotIds()) > 0 && !sameSnapshotIDs(req.GetSnapshotIds(), vgs) {
		return nil, status.Errorf(codes.InvalidArgument, "the snapshot IDs given are not the members of volume group snapshot %q", req.GetGroupSnapshotId())
	}
	return &csi.GetVolumeGroupSnapshotResponse{GroupSnapshot: vgs}, nil
}

func (c *groupController) DeleteVolumeGroupSnapshot(ctx context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error) {
	d := c.d
	if req.GetGroupSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "group snapshot ID is required")
	}
	gid, err := ParseGroupSnapshotID(req.GetGroupSnapshotId())
	if err != nil {
		d.log.Info("DeleteVolumeGroupSnapshot: not a group snapshot ID, nothing to delete", "groupSnapshotID", req.GetGroupSnapshotId(), "error", err.Error())
		return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
	}
	unlock, err := d.inFlight.lock("group snapshot " + req.GetGroupSnapshotId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	cl, cred, s, err := d.open(ctx, gid.ClusterID, req.GetSecrets(), changing)
	if err != nil {
		return nil, err
	}
	g := gid.ref()
	release, err := d.lockGroup(ctx, s, cl.ID, g)
	if status.Code(err) == codes.NotFound {
		return &csi.DeleteVolumeGroupSnapshotResponse{}, nil // no such pool or namespace
	}
	if err != nil {
		return nil, err
	}
	defer release()
	ok, err := ownedGroup(ctx, s, g)
	if err != nil {
		return nil, storeError(err, cred, "group %s", g.Name)
	}
	if !ok {
		d.log.Info("DeleteVolumeGroupSnapshot: no group of the driver's by that ID, nothing to delete", "groupSnapshotID", req.GetGroupSnapshotId())
		return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
	}
	gs, found, err := groupSnapshotOf(ctx, s, g)
	if err != nil {
		return nil, storeError(err, cred, "group %s", g.Name)
	}
	if found && gs.Complete && len(req.GetSnapshotIds()) > 0 {
		vgs, err := d.groupSnapshotMessage(ctx, s, cred, cl, req.GetGroupSnapshotId(), g, gs, nil)
		if err != nil {
			return nil, err
		}
		if !sameSnapshotIDs(req.GetSnapshotIds(), vgs) {
			return nil, status.Errorf(codes.InvalidArgument, "the snapshot IDs given are not the members of volume group snapshot %q", req.GetGroupSnapshotId())
		}
	}
	if err := d.removeGroupSnapshot(ctx, s, cred, cl.ID, g, gs, found); err != nil {
		return nil, err
	}
	// Source volumes deleted while this snapshot held them are
	// tombstones that may now go; what stays is left for Sweep.
	for _, m := range gs.Members {
		d.retireTombstone(ctx, s, cred, cl.ID, ImageRef{Pool: m.Pool, Namespace: g.Namespace, ID: m.ImageID})
	}
	return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
}
