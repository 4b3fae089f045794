package csi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/fakestore"
)

func (h *harness) groupSnapReq(name string, volIDs ...string) *csipb.CreateVolumeGroupSnapshotRequest {
	return &csipb.CreateVolumeGroupSnapshotRequest{Name: name, SourceVolumeIds: volIDs,
		Parameters: map[string]string{"clusterID": testCluster}, Secrets: secrets()}
}

func (h *harness) createGroupSnapshot(name string, volIDs ...string) *csipb.VolumeGroupSnapshot {
	h.t.Helper()
	r, err := h.group.CreateVolumeGroupSnapshot(context.Background(), h.groupSnapReq(name, volIDs...))
	require.NoError(h.t, err)
	return r.GetGroupSnapshot()
}

// testGroupName is the RBD group behind a VolumeGroupSnapshot name.
func testGroupName(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "csi-vgs-" + hex.EncodeToString(sum[:])[:32]
}

func snapshotIDs(vgs *csipb.VolumeGroupSnapshot) []string {
	var ids []string
	for _, sn := range vgs.GetSnapshots() {
		ids = append(ids, sn.GetSnapshotId())
	}
	return ids
}

func TestGroupSnapshotCreateGetDelete(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	a := h.createVolume("vol-a", 1<<20)
	b := h.createVolume("vol-b", 2<<20)

	vgs := h.createGroupSnapshot("vgs-1", a.GetVolumeId(), b.GetVolumeId())
	gid, err := csi.ParseGroupSnapshotID(vgs.GetGroupSnapshotId())
	require.NoError(t, err)
	assert.Equal(t, csi.GroupSnapshotID{ClusterID: testCluster, Pool: h.pool, Group: testGroupName("vgs-1")}, gid)
	assert.True(t, vgs.GetReadyToUse())
	assert.NotNil(t, vgs.GetCreationTime())
	require.Len(t, vgs.GetSnapshots(), 2)
	sources := map[string]int64{}
	for _, sn := range vgs.GetSnapshots() {
		assert.Equal(t, vgs.GetGroupSnapshotId(), sn.GetGroupSnapshotId())
		assert.True(t, sn.GetReadyToUse())
		assert.NotNil(t, sn.GetCreationTime())
		sid, err := csi.ParseSnapshotID(sn.GetSnapshotId())
		require.NoError(t, err)
		assert.Regexp(t, `^\.group\.[0-9a-f]+_[0-9a-f]+_[0-9a-f]+$`, sid.Snap)
		sources[sn.GetSourceVolumeId()] = sn.GetSizeBytes()
	}
	assert.Equal(t, map[string]int64{a.GetVolumeId(): 1 << 20, b.GetVolumeId(): 2 << 20}, sources)
	// The group and its snapshot stay; the sources are members no more.
	assert.Equal(t, []string{testGroupName("vgs-1"), testGroupName("vgs-1") + "@" + testGroupName("vgs-1")}, h.store.Groups(testCluster, h.pool, ""))

	// Idempotent: the same answer again.
	again := h.createGroupSnapshot("vgs-1", b.GetVolumeId(), a.GetVolumeId())
	assert.Equal(t, vgs.GetGroupSnapshotId(), again.GetGroupSnapshotId())
	assert.ElementsMatch(t, snapshotIDs(vgs), snapshotIDs(again))

	// Another set under the same name.
	c := h.createVolume("vol-c", 1<<20)
	_, err = h.group.CreateVolumeGroupSnapshot(ctx, h.groupSnapReq("vgs-1", a.GetVolumeId(), c.GetVolumeId()))
	assert.Equal(t, codes.AlreadyExists, code(err), "%v", err)

	// A volume is free for the next group snapshot.
	vgs2 := h.createGroupSnapshot("vgs-2", a.GetVolumeId(), c.GetVolumeId())
	assert.Len(t, vgs2.GetSnapshots(), 2)

	got, err := h.group.GetVolumeGroupSnapshot(ctx, &csipb.GetVolumeGroupSnapshotRequest{GroupSnapshotId: vgs.GetGroupSnapshotId(), Secrets: secrets()})
	require.NoError(t, err)
	assert.ElementsMatch(t, snapshotIDs(vgs), snapshotIDs(got.GetGroupSnapshot()))
	_, err = h.group.GetVolumeGroupSnapshot(ctx, &csipb.GetVolumeGroupSnapshotRequest{GroupSnapshotId: vgs.GetGroupSnapshotId(), SnapshotIds: snapshotIDs(vgs)})
	assert.NoError(t, err)
	_, err = h.group.GetVolumeGroupSnapshot(ctx, &csipb.GetVolumeGroupSnapshotRequest{GroupSnapshotId: vgs.GetGroupSnapshotId(), SnapshotIds: snapshotIDs(vgs)[:1]})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = h.group.GetVolumeGroupSnapshot(ctx, &csipb.GetVolumeGroupSnapshotRequest{})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = h.group.GetVolumeGroupSnapshot(ctx, &csipb.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "g1-nonsense"})
	assert.Equal(t, codes.NotFound, code(err))
	missing := csi.GroupSnapshotID{ClusterID: testCluster, Pool: h.pool, Group: testGroupName("nope")}.String()
	noPool := csi.GroupSnapshotID{ClusterID: testCluster, Pool: 99, Group: testGroupName("nope")}.String()
	noNS := csi.GroupSnapshotID{ClusterID: testCluster, Pool: h.pool, Namespace: "nope", Group: testGroupName("nope")}.String()
	for _, id := range []string{missing, noPool, noNS} {
		_, err = h.group.GetVolumeGroupSnapshot(ctx, &csipb.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id})
		assert.Equal(t, codes.NotFound, code(err), "%s: %v", id, err)
		_, err = h.group.DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, Secrets: secrets()})
		assert.NoError(t, err, id)
	}

	// Delete: wrong member list, then right, then again.
	_, err = h.group.DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: vgs.GetGroupSnapshotId(), SnapshotIds: snapshotIDs(vgs2), Secrets: secrets()})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = h.group.DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: vgs.GetGroupSnapshotId(), SnapshotIds: snapshotIDs(vgs), Secrets: secrets()})
	require.NoError(t, err)
	_, err = h.group.DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: vgs.GetGroupSnapshotId(), Secrets: secrets()})
	require.NoError(t, err)
	_, err = h.group.DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "not-an-id", Secrets: secrets()})
	require.NoError(t, err)
	_, err = h.group.DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = h.group.GetVolumeGroupSnapshot(ctx, &csipb.GetVolumeGroupSnapshotRequest{GroupSnapshotId: vgs.GetGroupSnapshotId()})
	assert.Equal(t, codes.NotFound, code(err))
	assert.Equal(t, []string{testGroupName("vgs-2"), testGroupName("vgs-2") + "@" + testGroupName("vgs-2")}, h.store.Groups(testCluster, h.pool, ""))
	assert.NotContains(t, h.store.Reservations(testCluster, h.pool, ""), "csi.group."+testGroupName("vgs-1"))

	_, err = h.group.DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: vgs2.GetGroupSnapshotId(), Secrets: secrets()})
	require.NoError(t, err)
	assert.Empty(t, h.store.Groups(testCluster, h.pool, ""))
	for _, im := range h.store.Images(testCluster) {
		assert.Empty(t, im.Snaps, "image %s", im.Name)
	}
	for _, v := range []*csipb.Volume{a, b, c} {
		require.NoError(t, h.deleteVolume(v.GetVolumeId()))
	}
	assert.Empty(t, h.store.Images(testCluster))
}

func TestGroupSnapshotArguments(t *testing.T) {
	h := newHarness(t, harnessOpts{configJSON: `[{"clusterID": "` + testCluster + `", "monitors": ["a:1"]}, {"clusterID": "other", "monitors": ["b:1"]}]`})
	h.store.AddNamespace(testCluster, h.pool, "tenant")
	ctx := context.Background()
	a := h.createVolume("vol-a", 1<<20)
	b := h.createVolume("vol-b", 1<<20)
	req := h.volReq("vol-t", 1<<20)
	req.Parameters["radosNamespace"] = "tenant"
	r, err := h.ctrl.CreateVolume(ctx, req)
	require.NoError(t, err)
	tenant := r.GetVolume()

	for _, tc := range []struct {
		what string
		req  *csipb.CreateVolumeGroupSnapshotRequest
		want codes.Code
	}{
		{"no name", h.groupSnapReq("", a.GetVolumeId()), codes.InvalidArgument},
		{"no sources", h.groupSnapReq("g"), codes.InvalidArgument},
		{"a source twice", h.groupSnapReq("g", a.GetVolumeId(), a.GetVolumeId()), codes.InvalidArgument},
		{"unknown parameter", func() *csipb.CreateVolumeGroupSnapshotRequest {
			r := h.groupSnapReq("g", a.GetVolumeId())
			r.Parameters["bogus"] = "1"
			return r
		}(), codes.InvalidArgument},
		{"another cluster in the class", func() *csipb.CreateVolumeGroupSnapshotRequest {
			r := h.groupSnapReq("g", a.GetVolumeId())
			r.Parameters["clusterID"] = "other"
			return r
		}(), codes.InvalidArgument},
		{"two clusters", h.groupSnapReq("g", a.GetVolumeId(), csi.VolumeID{ClusterID: "other", Pool: h.pool, Image: "csi-vol-" + randomHex(16)}.String()), codes.InvalidArgument},
		{"two namespaces", h.groupSnapReq("g", a.GetVolumeId(), tenant.GetVolumeId()), codes.FailedPrecondition},
		{"a missing source", h.groupSnapReq("g", a.GetVolumeId(), csi.VolumeID{ClusterID: testCluster, Pool: h.pool, Image: "csi-vol-" + randomHex(16)}.String()), codes.NotFound},
		{"an unparsable source", h.groupSnapReq("g", a.GetVolumeId(), "nonsense"), codes.NotFound},
	} {
		_, err := h.group.CreateVolumeGroupSnapshot(ctx, tc.req)
		assert.Equal(t, tc.want, code(err), "%s: %v", tc.what, err)
	}
	assert.Empty(t, h.store.Groups(testCluster, h.pool, ""), "nothing left by refused requests")

	// A group snapshot of the namespace's volumes lives in it.
	req = h.volReq("vol-t2", 1<<20)
	req.Parameters["radosNamespace"] = "tenant"
	r, err = h.ctrl.CreateVolume(ctx, req)
	require.NoError(t, err)
	vgs := h.createGroupSnapshot("g-tenant", tenant.GetVolumeId(), r.GetVolume().GetVolumeId())
	gid, err := csi.ParseGroupSnapshotID(vgs.GetGroupSnapshotId())
	require.NoError(t, err)
	assert.Equal(t, "tenant", gid.Namespace)
	assert.Len(t, h.store.Groups(testCluster, h.pool, "tenant"), 2)
	_ = b
}

func TestGroupSnapshotMembersAsSnapshots(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	a := h.createVolume("vol-a", 1<<20)
	b := h.createVolume("vol-b", 1<<20)
	plain := h.createSnapshot("plain", a.GetVolumeId())
	vgs := h.createGroupSnapshot("vgs", a.GetVolumeId(), b.GetVolumeId())
	member := vgs.GetSnapshots()[0]

	got, err := h.ctrl.GetSnapshot(ctx, &csipb.GetSnapshotRequest{SnapshotId: member.GetSnapshotId(), Secrets: secrets()})
	require.NoError(t, err)
	assert.Equal(t, vgs.GetGroupSnapshotId(), got.GetSnapshot().GetGroupSnapshotId())
	assert.Equal(t, member.GetSourceVolumeId(), got.GetSnapshot().GetSourceVolumeId())
	assert.Equal(t, member.GetSizeBytes(), got.GetSnapshot().GetSizeBytes())

	list, err := h.ctrl.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{SnapshotId: member.GetSnapshotId()})
	require.NoError(t, err)
	require.Len(t, list.GetEntries(), 1)
	assert.Equal(t, vgs.GetGroupSnapshotId(), list.GetEntries()[0].GetSnapshot().GetGroupSnapshotId())

	list, err = h.ctrl.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{SourceVolumeId: a.GetVolumeId()})
	require.NoError(t, err)
	groups := map[string]string{}
	for _, e := range list.GetEntries() {
		groups[e.GetSnapshot().GetSnapshotId()] = e.GetSnapshot().GetGroupSnapshotId()
	}
	aMember := ""
	for _, sn := range vgs.GetSnapshots() {
		if sn.GetSourceVolumeId() == a.GetVolumeId() {
			aMember = sn.GetSnapshotId()
		}
	}
	assert.Equal(t, map[string]string{plain.GetSnapshotId(): "", aMember: vgs.GetGroupSnapshotId()}, groups)

	list, err = h.ctrl.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{})
	require.NoError(t, err)
	var all []string
	for _, e := range list.GetEntries() {
		all = append(all, e.GetSnapshot().GetSnapshotId())
	}
	assert.ElementsMatch(t, append(snapshotIDs(vgs), plain.GetSnapshotId()), all)

	// DeleteSnapshot of a member: the spec's "part of a group".
	err = h.deleteSnapshot(member.GetSnapshotId())
	assert.Equal(t, codes.InvalidArgument, code(err), "%v", err)

	// A member restores: a clone of that member snapshot.
	req := h.volReq("restored", 1<<20)
	req.VolumeContentSource = &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
		Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: member.GetSnapshotId()}}}
	r, err := h.ctrl.CreateVolume(ctx, req)
	require.NoError(t, err)
	r2, err := h.ctrl.CreateVolume(ctx, req)
	require.NoError(t, err, "idempotent")
	assert.Equal(t, r.GetVolume().GetVolumeId(), r2.GetVolume().GetVolumeId())
	sid, err := csi.ParseSnapshotID(member.GetSnapshotId())
	require.NoError(t, err)
	restored := imageOfVolume(t, h, r.GetVolume().GetVolumeId())
	require.NotNil(t, restored.Parent)
	assert.Equal(t, sid.ImageID, restored.Parent.ImageID)

	// Deleting the source volumes and the group snapshot while the
	// clone lives: the member it needs waits in the trash, the other
	// source goes; the rest goes with the clone.
	require.NoError(t, h.deleteSnapshot(plain.GetSnapshotId()))
	require.NoError(t, h.deleteVolume(a.GetVolumeId()))
	require.NoError(t, h.deleteVolume(b.GetVolumeId()))
	_, err = h.group.DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: vgs.GetGroupSnapshotId(), Secrets: secrets()})
	require.NoError(t, err)
	assert.Empty(t, h.store.Groups(testCluster, h.pool, ""))
	names := h.imageNames()
	assert.Len(t, names, 2, "the clone and its source's tombstone with the trashed member: %v", names)
	assert.Contains(t, names[0]+names[1], "(trash).group.")
	err = h.deleteSnapshot(member.GetSnapshotId())
	assert.NoError(t, err, "a member gone with its group is deleted")
	require.NoError(t, h.deleteVolume(r.GetVolume().GetVolumeId()))
	assert.Empty(t, h.imageNames())
}

// imageOfVolume returns the fake image behind a volume ID.
func imageOfVolume(t *testing.T, h *harness, volID string) fakestore.ImageState {
	t.Helper()
	vid, err := csi.ParseVolumeID(volID)
	require.NoError(t, err)
	return findImage(t, h.store.Images(testCluster), vid.Image)
}

func TestGroupSnapshotFailures(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	a := h.createVolume("vol-a", 1<<20)
	b := h.createVolume("vol-b", 1<<20)

	// A failure at each step before the cut leaves nothing behind, and
	// the retry succeeds.
	for _, step := range []string{"create-group-snapshot/reserve", "create-group-snapshot/group", "create-group-snapshot/add", "create-group-snapshot/snapshot"} {
		h.faults.failOnce(step)
		_, err := h.group.CreateVolumeGroupSnapshot(ctx, h.groupSnapReq("vgs", a.GetVolumeId(), b.GetVolumeId()))
		require.Error(t, err, step)
		assert.Empty(t, h.store.Groups(testCluster, h.pool, ""), step)
		assert.NotContains(t, h.store.Reservations(testCluster, h.pool, ""), "csi.group."+testGroupName("vgs"), step)
		for _, im := range h.store.Images(testCluster) {
			assert.Empty(t, im.Snaps, step)
		}
		require.NoError(t, h.deleteVolume(a.GetVolumeId()), "%s: the source is in no group", step)
		a = h.createVolume("vol-a", 1<<20)
	}
	// After the cut: the snapshot stays, the retry releases the members.
	h.faults.failOnce("create-group-snapshot/release")
	_, err := h.group.CreateVolumeGroupSnapshot(ctx, h.groupSnapReq("vgs", a.GetVolumeId(), b.GetVolumeId()))
	require.Error(t, err)
	vgs := h.createGroupSnapshot("vgs", a.GetVolumeId(), b.GetVolumeId())
	assert.Len(t, vgs.GetSnapshots(), 2)
	images, err := h.store.Session(ctx, csi.Cluster{ID: testCluster}, csi.Credentials{ID: testUser, Key: testKey})
	require.NoError(t, err)
	members, err := images.GroupImages(ctx, csi.GroupRef{Pool: h.pool, Name: testGroupName("vgs")})
	require.NoError(t, err)
	assert.Empty(t, members)

	// A source in a foreign group is refused, and nothing is left.
	c := h.createVolume("vol-c", 1<<20)
	foreign := csi.GroupRef{Pool: h.pool, Name: "someone-elses"}
	require.NoError(t, images.CreateGroup(ctx, foreign))
	cid, _ := csi.ParseVolumeID(c.GetVolumeId())
	require.NoError(t, images.AddGroupImage(ctx, foreign, csi.ImageRef{Pool: h.pool, Name: cid.Image}))
	_, err = h.group.CreateVolumeGroupSnapshot(ctx, h.groupSnapReq("vgs-c", b.GetVolumeId(), c.GetVolumeId()))
	assert.Equal(t, codes.FailedPrecondition, code(err), "%v", err)
	assert.NotContains(t, h.store.Groups(testCluster, h.pool, ""), testGroupName("vgs-c"))
	members, err = images.GroupImages(ctx, foreign)
	require.NoError(t, err)
	assert.Len(t, members, 1, "the foreign group keeps its member")

	// A crash midway leaves an incomplete group snapshot (the first
	// member snapshotted); the retry removes it and takes it again.
	d := h.createVolume("vol-d", 1<<20)
	g := csi.GroupRef{Pool: h.pool, Name: testGroupName("vgs-d")}
	require.NoError(t, images.CreateGroup(ctx, g))
	for _, v := range []*csipb.Volume{a, d} {
		vid, _ := csi.ParseVolumeID(v.GetVolumeId())
		require.NoError(t, images.AddGroupImage(ctx, g, csi.ImageRef{Pool: h.pool, Name: vid.Image}))
	}
	h.store.CrashNextGroupSnapshot()
	require.Error(t, images.CreateGroupSnapshot(ctx, g, g.Name))
	assert.Contains(t, h.store.Groups(testCluster, h.pool, ""), g.Name+"@"+g.Name+"(incomplete)")
	require.NoError(t, images.SetReservation(ctx, h.pool, "", "csi.group."+g.Name, "vgs-d"))
	_, err = h.group.GetVolumeGroupSnapshot(ctx, &csipb.GetVolumeGroupSnapshotRequest{
		GroupSnapshotId: csi.GroupSnapshotID{ClusterID: testCluster, Pool: h.pool, Group: g.Name}.String()})
	assert.Equal(t, codes.NotFound, code(err), "an incomplete group snapshot is not there yet")
	vgsD := h.createGroupSnapshot("vgs-d", a.GetVolumeId(), d.GetVolumeId())
	assert.Len(t, vgsD.GetSnapshots(), 2)
	assert.Contains(t, h.store.Groups(testCluster, h.pool, ""), g.Name+"@"+g.Name)
	members, err = images.GroupImages(ctx, g)
	require.NoError(t, err)
	assert.Empty(t, members)
	for _, im := range h.store.Images(testCluster) {
		n := 0
		for _, sn := range im.Snaps {
			if len(sn) > 7 && sn[:7] == "(group)" {
				n++
			}
		}
		assert.LessOrEqual(t, n, 2, "image %s: one member per group snapshot, no leftovers: %v", im.Name, im.Snaps)
	}
}

func TestGroupSnapshotID(t *testing.T) {
	g := csi.GroupSnapshotID{ClusterID: "b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07", Pool: 2, Namespace: "tenant-a", Group: testGroupName("x")}
	s, err := g.Encode()
	require.NoError(t, err)
	assert.Equal(t, "g1-24-b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07-2-8-tenant-a-"+g.Group, s)
	back, err := csi.ParseGroupSnapshotID(s)
	require.NoError(t, err)
	assert.Equal(t, g, back)
	for _, bad := range []string{
		"", "g1-", "g2-" + s[3:], "g1-24-b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07-02-8-tenant-a-x", // leading zero
		"g1-24-b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07-2-8-tenant-a-", // no group
		"g1-24-b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07-2-8-tenant-a-a/b",
		"g1-24-b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07-2-8-tenant-a-" + string(make([]byte, 100)),
		s[:len(s)-1] + " ",
	} {
		_, err := csi.ParseGroupSnapshotID(bad)
		assert.Error(t, err, "%q", bad)
	}
	long := g
	long.Namespace = string(make([]byte, 60))
	for i := range []byte(long.Namespace) {
		long.Namespace = long.Namespace[:i] + "n" + long.Namespace[i+1:]
	}
	_, err = long.Encode()
	assert.ErrorIs(t, err, csi.ErrIDTooLong)
}

// TestGroupSnapshotDeleteRetried fails DeleteVolumeGroupSnapshot before
// each of its steps; every retry carries on and the last leaves nothing.
func TestGroupSnapshotDeleteRetried(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	a := h.createVolume("vol-a", 1<<20)
	b := h.createVolume("vol-b", 1<<20)
	vgs := h.createGroupSnapshot("vgs", a.GetVolumeId(), b.GetVolumeId())
	// A source deleted while the group snapshot holds it is a tombstone
	// that goes with the group snapshot.
	require.NoError(t, h.deleteVolume(a.GetVolumeId()))
	assert.Len(t, h.store.Images(testCluster), 2)
	del := &csipb.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: vgs.GetGroupSnapshotId(), Secrets: secrets()}
	for _, step := range []string{"delete-group-snapshot/remove", "delete-group-snapshot/group", "delete-group-snapshot/unreserve"} {
		h.faults.failOnce(step)
		_, err := h.group.DeleteVolumeGroupSnapshot(ctx, del)
		assert.Equal(t, codes.Internal, code(err), step)
	}
	_, err := h.group.DeleteVolumeGroupSnapshot(ctx, del)
	require.NoError(t, err)
	assert.Empty(t, h.store.Groups(testCluster, h.pool, ""))
	assert.Empty(t, h.store.Reservations(testCluster, h.pool, ""))
	bName := imageOfVolume(t, h, b.GetVolumeId()).Name
	// The retry that found the group snapshot gone no longer knew its
	// members: the tombstone is the sweep's.
	assert.Len(t, h.imageNames(), 2)
	require.NoError(t, h.drv.Sweep(ctx))
	assert.Equal(t, []string{bName}, h.imageNames(), "the sweep removed the deleted source")

	// Without failures the tombstone goes with the group snapshot.
	vgs = h.createGroupSnapshot("vgs-2", b.GetVolumeId())
	require.NoError(t, h.deleteVolume(b.GetVolumeId()))
	assert.Len(t, h.imageNames(), 1)
	assert.Contains(t, h.imageNames()[0], "-deleted-")
	_, err = h.group.DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: vgs.GetGroupSnapshotId(), Secrets: secrets()})
	require.NoError(t, err)
	assert.Empty(t, h.imageNames(), "the deleted source went with the group snapshot")
}

// TestGroupSnapshotMemberIDsTooLong: the member snapshots' names are
// known only once the group snapshot is cut; when their snapshot IDs
// would not fit 128 bytes the group snapshot is discarded and the
// request refused, though the group snapshot's own ID fits.
func TestGroupSnapshotMemberIDsTooLong(t *testing.T) {
	ns := strings.Repeat("n", 66)
	h := newHarness(t, harnessOpts{})
	h.store.AddNamespace(testCluster, h.pool, ns)
	ctx := context.Background()
	var ids []string
	for _, name := range []string{"a", "b"} {
		req := h.volReq(name, 1<<20)
		req.Parameters["radosNamespace"] = ns
		req.Parameters["volumeNamePrefix"] = "v-"
		r, err := h.ctrl.CreateVolume(ctx, req)
		require.NoError(t, err)
		ids = append(ids, r.GetVolume().GetVolumeId())
	}
	req := h.groupSnapReq("vgs", ids...)
	req.Parameters["snapshotNamePrefix"] = "g-"
	_, err := h.group.CreateVolumeGroupSnapshot(ctx, req)
	assert.Equal(t, codes.InvalidArgument, code(err), "%v", err)
	assert.Contains(t, err.Error(), "the member snapshot of image")
	assert.Empty(t, h.store.Groups(testCluster, h.pool, ns))
	assert.Empty(t, h.store.Reservations(testCluster, h.pool, ns))
	for _, im := range h.store.Images(testCluster) {
		assert.Empty(t, im.Snaps, im.Name)
	}
}

// TestDeleteVolumeLeavesInterruptedGroup: a CreateVolumeGroupSnapshot
// that died after adding its sources to the group, and was never
// retried, does not block DeleteVolume of a source; a volume in a group
// that is not the driver's stays.
func TestDeleteVolumeLeavesInterruptedGroup(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	a := h.createVolume("vol-a", 1<<20)
	b := h.createVolume("vol-b", 1<<20)
	s, err := h.store.Session(ctx, csi.Cluster{ID: testCluster}, csi.Credentials{ID: testUser, Key: testKey})
	require.NoError(t, err)
	ours := csi.GroupRef{Pool: h.pool, Name: testGroupName("vgs")}
	require.NoError(t, s.SetReservation(ctx, h.pool, "", "csi.group."+ours.Name, "vgs"))
	require.NoError(t, s.CreateGroup(ctx, ours))
	foreign := csi.GroupRef{Pool: h.pool, Name: testGroupName("not-reserved")}
	require.NoError(t, s.CreateGroup(ctx, foreign))
	aid, _ := csi.ParseVolumeID(a.GetVolumeId())
	bid, _ := csi.ParseVolumeID(b.GetVolumeId())
	require.NoError(t, s.AddGroupImage(ctx, ours, csi.ImageRef{Pool: h.pool, Name: aid.Image}))
	require.NoError(t, s.AddGroupImage(ctx, foreign, csi.ImageRef{Pool: h.pool, Name: bid.Image}))

	require.NoError(t, h.deleteVolume(a.GetVolumeId()))
	err = h.deleteVolume(b.GetVolumeId())
	assert.Equal(t, codes.FailedPrecondition, code(err), "%v", err)
	assert.Equal(t, []string{bid.Image}, h.imageNames())
	members, err := s.GroupImages(ctx, ours)
	require.NoError(t, err)
	assert.Empty(t, members)
}

// TestSweepInterruptedGroups: what CreateVolumeGroupSnapshot calls that
// died and were never retried left, Sweep collects: a group with an
// incomplete snapshot (its member snapshot keeping a deleted volume as a
// tombstone; this one is swept as soon as a member goes into another
// group snapshot), a group with members and no snapshot, the members of
// a complete one; a live group snapshot, a group someone else made and a
// group a call is working on stay.
func TestSweepInterruptedGroups(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	s, err := h.store.Session(ctx, csi.Cluster{ID: testCluster}, csi.Credentials{ID: testUser, Key: testKey})
	require.NoError(t, err)
	vols := map[string]*csipb.Volume{}
	images := map[string]csi.ImageRef{}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		vols[n] = h.createVolume("vol-"+n, 1<<20)
		vid, _ := csi.ParseVolumeID(vols[n].GetVolumeId())
		images[n] = csi.ImageRef{Pool: h.pool, Name: vid.Image}
	}
	// group, reserved (the driver's) or not, with members
	group := func(name string, reserve bool, members ...string) csi.GroupRef {
		g := csi.GroupRef{Pool: h.pool, Name: testGroupName(name)}
		if reserve {
			require.NoError(t, s.SetReservation(ctx, h.pool, "", "csi.group."+g.Name, name))
		}
		require.NoError(t, s.CreateGroup(ctx, g))
		for _, m := range members {
			require.NoError(t, s.AddGroupImage(ctx, g, images[m]))
		}
		return g
	}
	crashed := group("crashed", true, "a", "b")
	h.store.CrashNextGroupSnapshot()
	require.Error(t, s.CreateGroupSnapshot(ctx, crashed, crashed.Name))
	require.NoError(t, s.RemoveGroupImage(ctx, crashed, images["a"]))
	require.NoError(t, h.deleteVolume(vols["a"].GetVolumeId()), "a's incomplete member snapshot makes it a tombstone")
	group("added", true, "c")
	cut := group("cut", true, "d")
	require.NoError(t, s.CreateGroupSnapshot(ctx, cut, cut.Name))
	foreign := group("foreign", false, "e")
	// b, left in the crashed group, is freed for the next group
	// snapshot at once: the crashed group is swept then.
	live := h.createGroupSnapshot("live", vols["b"].GetVolumeId())
	assert.NotContains(t, h.store.Groups(testCluster, h.pool, ""), crashed.Name)
	busy := group("busy", true)
	release, err := s.LockOperation(ctx, h.pool, "", "group "+testCluster+"/"+strconv.FormatInt(h.pool, 10)+"//"+busy.Name)
	require.NoError(t, err)
	defer release()

	require.NoError(t, h.drv.Sweep(ctx))
	assert.ElementsMatch(t, []string{
		cut.Name, cut.Name + "@" + cut.Name, foreign.Name, busy.Name,
		testGroupName("live"), testGroupName("live") + "@" + testGroupName("live"),
	}, h.store.Groups(testCluster, h.pool, ""))
	for _, g := range []csi.GroupRef{cut, busy} {
		members, err := s.GroupImages(ctx, g)
		require.NoError(t, err)
		assert.Empty(t, members, g.Name)
	}
	members, err := s.GroupImages(ctx, foreign)
	require.NoError(t, err)
	assert.Len(t, members, 1, "a group that is not the driver's keeps its members")
	res := h.store.Reservations(testCluster, h.pool, "")
	assert.NotContains(t, res, "csi.group."+crashed.Name)
	assert.NotContains(t, res, "csi.group."+testGroupName("added"))
	for _, im := range h.store.Images(testCluster) {
		assert.NotContains(t, im.Name, "-deleted-", "the tombstone went with the incomplete member snapshot")
	}
	_, err = h.group.GetVolumeGroupSnapshot(ctx, &csipb.GetVolumeGroupSnapshotRequest{GroupSnapshotId: live.GetGroupSnapshotId()})
	assert.NoError(t, err, "a live group snapshot stays")
	for _, n := range []string{"c", "d"} {
		require.NoError(t, h.deleteVolume(vols[n].GetVolumeId()), n)
	}
}
