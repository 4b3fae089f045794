package csi_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi"
)

func code(err error) codes.Code { return status.Code(err) }

func TestCreateVolumeIdempotent(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	v1 := h.createVolume("pvc-a", 10<<20)
	assert.EqualValues(t, 10<<20, v1.GetCapacityBytes())
	v2 := h.createVolume("pvc-a", 10<<20)
	assert.Equal(t, v1.GetVolumeId(), v2.GetVolumeId())
	assert.Len(t, h.store.Images(testCluster), 1)

	vid, err := csi.ParseVolumeID(v1.GetVolumeId())
	require.NoError(t, err)
	assert.Equal(t, csi.VolumeID{ClusterID: testCluster, Pool: h.pool, Image: vid.Image}, vid)
	assert.True(t, strings.HasPrefix(vid.Image, "csi-vol-"))
	assert.Equal(t, map[string]string{"clusterID": testCluster, "pool": "rbd", "imageName": vid.Image, "fsType": "ext4"}, v1.GetVolumeContext())

	// A size the existing volume does not satisfy.
	req := h.volReq("pvc-a", 20<<20)
	req.CapacityRange.LimitBytes = 20 << 20
	_, err = h.ctrl.CreateVolume(ctx, req)
	assert.Equal(t, codes.AlreadyExists, code(err), "%v", err)

	// A size range the existing volume satisfies is fine.
	req = h.volReq("pvc-a", 5<<20)
	req.CapacityRange.LimitBytes = 10 << 20
	_, err = h.ctrl.CreateVolume(ctx, req)
	assert.NoError(t, err)

	// The same name with a content source is another volume.
	snap := h.createSnapshot("snap-a", v1.GetVolumeId())
	req = h.volReq("pvc-a", 10<<20)
	req.VolumeContentSource = &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
		Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshotId()}}}
	_, err = h.ctrl.CreateVolume(ctx, req)
	assert.Equal(t, codes.AlreadyExists, code(err), "%v", err)
}

func TestCreateVolumeSizes(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	for _, tc := range []struct {
		req, lim int64
		want     int64
		code     codes.Code
	}{
		{0, 0, 1 << 30, codes.OK},
		{1, 0, 1 << 20, codes.OK},
		{(1 << 20) + 1, 0, 2 << 20, codes.OK},
		{(1 << 20) + 1, (1 << 20) + 8192, (1 << 20) + 4096, codes.OK},
		{0, 8192, 8192, codes.OK},
		{5000, 5000, 0, codes.OutOfRange},
		{10, 5, 0, codes.InvalidArgument},
		{-1, 0, 0, codes.InvalidArgument},
	} {
		req := h.volReq(fmt.Sprintf("size-%d-%d", tc.req, tc.lim), tc.req)
		req.CapacityRange.LimitBytes = tc.lim
		r, err := h.ctrl.CreateVolume(ctx, req)
		require.Equal(t, tc.code, code(err), "%d..%d: %v", tc.req, tc.lim, err)
		if err == nil {
			assert.Equal(t, tc.want, r.GetVolume().GetCapacityBytes(), "%d..%d", tc.req, tc.lim)
		}
	}
}

func TestCreateVolumeParameters(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	for _, tc := range []struct {
		params map[string]string
		code   codes.Code
		msg    string
	}{
		{map[string]string{"pool": "rbd", "bogus": "1", "other": "2"}, codes.InvalidArgument, `["bogus" "other"]`},
		{map[string]string{"clusterID": testCluster}, codes.InvalidArgument, `"pool" is required`},
		{map[string]string{"pool": "nope"}, codes.InvalidArgument, `pool "nope" does not exist`},
		{map[string]string{"pool": "rbd", "clusterID": "elsewhere"}, codes.InvalidArgument, `cluster "elsewhere" is not in the cluster config`},
		{map[string]string{"pool": "rbd", "imageFeatures": "layering,journaling"}, codes.InvalidArgument, `unsupported image feature "journaling"`},
		{map[string]string{"pool": "rbd", "imageFeatures": "layering,fast-diff"}, codes.InvalidArgument, `"fast-diff" needs "object-map"`},
		{map[string]string{"pool": "rbd", "dataPool": "nope"}, codes.InvalidArgument, `data pool "nope"`},
		{map[string]string{"pool": "rbd", "volumeNamePrefix": "a/b"}, codes.InvalidArgument, `volumeNamePrefix`},
		{map[string]string{"pool": "rbd", "radosNamespace": "missing"}, codes.InvalidArgument, `namespace "missing"`},
		{map[string]string{"pool": "rbd", "csi.storage.k8s.io/fstype": "btrfs"}, codes.InvalidArgument, `"btrfs" is not supported`},
		{map[string]string{"pool": "rbd", "mkfsOptions": "-m0 -d run/purerbd-csi"}, codes.InvalidArgument, `-d`},
		{map[string]string{"pool": "rbd", "mkfsOptions": "-m0 -E nodiscard", "csi.storage.k8s.io/fstype": "xfs"}, codes.InvalidArgument, `mkfs`},
		// Everything ceph-csi users put in a StorageClass, plus the
		// sidecars' own keys.
		{map[string]string{
			"clusterID": testCluster, "pool": "rbd", "dataPool": "ec-data", "radosNamespace": "",
			"imageFeatures":    "layering,exclusive-lock,object-map,fast-diff,deep-flatten",
			"volumeNamePrefix": "k8s-", "snapshotNamePrefix": "k8s-snap-", "mkfsOptions": "-K -i maxpct=10",
			"csi.storage.k8s.io/fstype":                             "xfs",
			"csi.storage.k8s.io/provisioner-secret-name":            "csi-rbd-secret",
			"csi.storage.k8s.io/provisioner-secret-namespace":       "default",
			"csi.storage.k8s.io/controller-expand-secret-name":      "csi-rbd-secret",
			"csi.storage.k8s.io/controller-expand-secret-namespace": "default",
			"csi.storage.k8s.io/node-stage-secret-name":             "csi-rbd-secret",
			"csi.storage.k8s.io/node-stage-secret-namespace":        "default",
			"csi.storage.k8s.io/pvc/name":                           "data",
			"csi.storage.k8s.io/pvc/namespace":                      "default",
			"csi.storage.k8s.io/pv/name":                            "pvc-123",
		}, codes.OK, ""},
	} {
		req := h.volReq("params", 1<<20)
		req.Parameters = tc.params
		req.VolumeCapabilities[0].GetMount().FsType = ""
		r, err := h.ctrl.CreateVolume(ctx, req)
		require.Equal(t, tc.code, code(err), "%v: %v", tc.params, err)
		if err != nil {
			assert.Contains(t, status.Convert(err).Message(), tc.msg)
			continue
		}
		vc := r.GetVolume().GetVolumeContext()
		assert.Equal(t, "-K -i maxpct=10", vc["mkfsOptions"])
		assert.Equal(t, "xfs", vc["fsType"])
		assert.Equal(t, "ec-data", vc["dataPool"])
		assert.True(t, strings.HasPrefix(vc["imageName"], "k8s-"), vc["imageName"])
	}
}

func TestRadosNamespace(t *testing.T) {
	h := newHarness(t, harnessOpts{configJSON: `[{"clusterID": "` + testCluster + `", "monitors": ["a:1"], "rbd": {"radosNamespace": "tenant"}}]`})
	h.store.AddNamespace(testCluster, h.pool, "tenant")
	h.store.AddNamespace(testCluster, h.pool, "other")
	v := h.createVolume("ns-vol", 1<<20)
	vid, err := csi.ParseVolumeID(v.GetVolumeId())
	require.NoError(t, err)
	assert.Equal(t, "tenant", vid.Namespace, "the cluster config's namespace is the default")
	assert.Equal(t, "tenant", v.GetVolumeContext()["radosNamespace"])

	req := h.volReq("ns-vol-2", 1<<20)
	req.Parameters["radosNamespace"] = "other"
	r, err := h.ctrl.CreateVolume(context.Background(), req)
	require.NoError(t, err)
	vid, _ = csi.ParseVolumeID(r.GetVolume().GetVolumeId())
	assert.Equal(t, "other", vid.Namespace)

	// Snapshots and clones stay in the namespace.
	s := h.createSnapshot("ns-snap", v.GetVolumeId())
	sid, err := csi.ParseSnapshotID(s.GetSnapshotId())
	require.NoError(t, err)
	assert.Equal(t, "tenant", sid.Namespace)
	assert.Equal(t, v.GetVolumeId(), s.GetSourceVolumeId())

	list, err := h.ctrl.ListVolumes(context.Background(), &csipb.ListVolumesRequest{})
	require.NoError(t, err)
	assert.Len(t, list.GetEntries(), 1, "only the configured namespace and the default are scanned")
}

func TestAccessModes(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	src := h.createVolume("src", 1<<20)
	snap := h.createSnapshot("src-snap", src.GetVolumeId())
	fromSnap := &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
		Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshotId()}}}
	M := csipb.VolumeCapability_AccessMode_Mode(0)
	_ = M
	for i, tc := range []struct {
		cap    *csipb.VolumeCapability
		source bool
		code   codes.Code
	}{
		{mountCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER), false, codes.OK},
		{mountCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER), false, codes.OK},
		{mountCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER), false, codes.OK},
		{mountCap(csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY), false, codes.InvalidArgument},
		{mountCap(csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY), true, codes.OK},
		{blockCap(csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY), true, codes.OK},
		{mountCap(csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER), false, codes.InvalidArgument},
		{blockCap(csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER), false, codes.OK},
		{mountCap(csipb.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER), false, codes.InvalidArgument},
		{mountCap(csipb.VolumeCapability_AccessMode_UNKNOWN), false, codes.InvalidArgument},
		{&csipb.VolumeCapability{AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "ntfs"}}}, false, codes.InvalidArgument},
	} {
		req := h.volReq(fmt.Sprintf("mode-%d", i), 1<<20)
		req.VolumeCapabilities = []*csipb.VolumeCapability{tc.cap}
		if tc.source {
			req.VolumeContentSource = fromSnap
		}
		_, err := h.ctrl.CreateVolume(ctx, req)
		assert.Equal(t, tc.code, code(err), "case %d %v source=%v: %v", i, tc.cap, tc.source, err)
	}
}

// TestConcurrentCallsAborted: a second call for a name or volume already
// being worked on is refused with ABORTED, and succeeds afterwards.
func TestConcurrentCallsAborted(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	reached := h.faults.blockAt("create-volume/create")
	var wg sync.WaitGroup
	var first *csipb.CreateVolumeResponse
	var firstErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		first, firstErr = h.ctrl.CreateVolume(ctx, h.volReq("busy", 1<<20))
	}()
	release := <-reached
	_, err := h.ctrl.CreateVolume(ctx, h.volReq("busy", 1<<20))
	assert.Equal(t, codes.Aborted, code(err), "%v", err)
	// Another name is not held up.
	h.createVolume("other", 1<<20)
	close(release)
	wg.Wait()
	require.NoError(t, firstErr)
	second, err := h.ctrl.CreateVolume(ctx, h.volReq("busy", 1<<20))
	require.NoError(t, err)
	assert.Equal(t, first.GetVolume().GetVolumeId(), second.GetVolume().GetVolumeId())

	// The same volume, by ID.
	id := first.GetVolume().GetVolumeId()
	reached = h.faults.blockAt("create-snapshot/snapshot")
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, firstErr = h.ctrl.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{Name: "s", SourceVolumeId: id, Secrets: secrets()})
	}()
	release = <-reached
	assert.Equal(t, codes.Aborted, code(h.deleteVolume(id)))
	_, err = h.ctrl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csipb.CapacityRange{RequiredBytes: 2 << 20}, Secrets: secrets()})
	assert.Equal(t, codes.Aborted, code(err))
	_, err = h.ctrl.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{Name: "s", SourceVolumeId: id, Secrets: secrets()})
	assert.Equal(t, codes.Aborted, code(err))
	close(release)
	wg.Wait()
	require.NoError(t, firstErr)
}

func TestDeleteUnknownIsOK(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	assert.NoError(t, h.deleteVolume("not-an-id"))
	assert.NoError(t, h.deleteVolume(csi.VolumeID{ClusterID: testCluster, Pool: h.pool, Image: "csi-vol-gone"}.String()))
	assert.NoError(t, h.deleteVolume(csi.VolumeID{ClusterID: testCluster, Pool: 99, Image: "csi-vol-gone"}.String()), "pool gone")
	assert.NoError(t, h.deleteSnapshot("not-an-id"))
	assert.NoError(t, h.deleteSnapshot(csi.SnapshotID{ClusterID: testCluster, Pool: h.pool, ImageID: "abc", Snap: "csi-snap-x"}.String()))
	v := h.createVolume("v", 1<<20)
	require.NoError(t, h.deleteVolume(v.GetVolumeId()))
	require.NoError(t, h.deleteVolume(v.GetVolumeId()), "twice")
	assert.Empty(t, h.imageNames())
	assert.Equal(t, codes.InvalidArgument, code(h.deleteVolume("")))
}

// TestInterruptedImageCreation: an image creation interrupted inside RBD
// (name taken, no header) is cleared and made again by the retry.
func TestInterruptedImageCreation(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	v := h.createVolume("ghost", 1<<20)
	vid, _ := csi.ParseVolumeID(v.GetVolumeId())
	require.NoError(t, h.deleteVolume(v.GetVolumeId()))
	h.store.AddGhost(testCluster, h.pool, "", vid.Image)
	v2 := h.createVolume("ghost", 1<<20)
	assert.Equal(t, v.GetVolumeId(), v2.GetVolumeId())
	assert.Equal(t, []string{vid.Image}, h.imageNames())
	assert.Contains(t, h.logs.String(), "interrupted image creation")
}

func TestDeleteVolumeInUse(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	v := h.createVolume("mapped", 1<<20)
	vid, _ := csi.ParseVolumeID(v.GetVolumeId())
	require.NoError(t, h.store.SetInUse(testCluster, h.pool, "", vid.Image, true))
	err := h.deleteVolume(v.GetVolumeId())
	assert.Equal(t, codes.FailedPrecondition, code(err), "%v", err)
	require.NoError(t, h.store.SetInUse(testCluster, h.pool, "", vid.Image, false))
	assert.NoError(t, h.deleteVolume(v.GetVolumeId()))
}

// TestSnapshotsOutliveVolumes: deleting a volume with snapshots, or a
// snapshot with clones, succeeds at once; the RBD objects stay as
// tombstones until nothing needs them, then go.
func TestSnapshotsOutliveVolumes(t *testing.T) {
	for _, trash := range []bool{false, true} {
		t.Run(fmt.Sprintf("trash=%v", trash), func(t *testing.T) { snapshotsOutliveVolumes(t, harnessOpts{trash: trash}) })
	}
}

func snapshotsOutliveVolumes(t *testing.T, o harnessOpts) {
	h := newHarness(t, o)
	ctx := context.Background()
	v := h.createVolume("origin", 4<<20)
	s := h.createSnapshot("origin-snap", v.GetVolumeId())
	assert.EqualValues(t, 4<<20, s.GetSizeBytes())
	assert.True(t, s.GetReadyToUse())

	require.NoError(t, h.deleteVolume(v.GetVolumeId()))
	vols, err := h.ctrl.ListVolumes(ctx, &csipb.ListVolumesRequest{})
	require.NoError(t, err)
	assert.Empty(t, vols.GetEntries(), "a tombstone is not a volume")
	_, err = h.ctrl.ControllerGetVolume(ctx, &csipb.ControllerGetVolumeRequest{VolumeId: v.GetVolumeId()})
	assert.Equal(t, codes.NotFound, code(err))

	got, err := h.ctrl.GetSnapshot(ctx, &csipb.GetSnapshotRequest{SnapshotId: s.GetSnapshotId(), Secrets: secrets()})
	require.NoError(t, err)
	assert.Equal(t, v.GetVolumeId(), got.GetSnapshot().GetSourceVolumeId(), "source reported by its original ID")

	// The name of the deleted volume is free again.
	v2 := h.createVolume("origin", 8<<20)
	assert.Equal(t, v.GetVolumeId(), v2.GetVolumeId())
	assert.EqualValues(t, 8<<20, v2.GetCapacityBytes())
	require.NoError(t, h.deleteVolume(v2.GetVolumeId()))

	// A clone of the snapshot of the deleted volume.
	req := h.volReq("restored", 16<<20)
	req.VolumeContentSource = &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
		Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: s.GetSnapshotId()}}}
	r, err := h.ctrl.CreateVolume(ctx, req)
	require.NoError(t, err)
	assert.EqualValues(t, 16<<20, r.GetVolume().GetCapacityBytes(), "grown past the snapshot's size")
	assert.NotNil(t, r.GetVolume().GetContentSource())

	require.NoError(t, h.deleteSnapshot(s.GetSnapshotId()))
	_, err = h.ctrl.GetSnapshot(ctx, &csipb.GetSnapshotRequest{SnapshotId: s.GetSnapshotId(), Secrets: secrets()})
	assert.Equal(t, codes.NotFound, code(err))
	names := h.imageNames()
	require.Len(t, names, 2, "%v", names)
	if o.trash {
		assert.Contains(t, names[0]+names[1], "-deleted-", "image kept as a tombstone for the clone")
		assert.Contains(t, names[0]+names[1], "@(trash)", "snapshot in RBD's snapshot trash")
	} else {
		assert.Contains(t, names[0]+names[1], "-deleted-", "snapshot and image kept as tombstones for the clone")
	}

	require.NoError(t, h.deleteVolume(r.GetVolume().GetVolumeId()))
	assert.Empty(t, h.imageNames(), "the last clone takes the tombstones with it")
	assert.Empty(t, h.store.Reservations(testCluster, h.pool, ""))
}

func TestCloneVolume(t *testing.T) {
	for _, trash := range []bool{false, true} {
		t.Run(fmt.Sprintf("trash=%v", trash), func(t *testing.T) { cloneVolume(t, harnessOpts{trash: trash}) })
	}
}

func cloneVolume(t *testing.T, o harnessOpts) {
	h := newHarness(t, o)
	ctx := context.Background()
	src := h.createVolume("src", 4<<20)
	req := h.volReq("clone", 0)
	req.VolumeContentSource = &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Volume{
		Volume: &csipb.VolumeContentSource_VolumeSource{VolumeId: src.GetVolumeId()}}}
	req.VolumeCapabilities = []*csipb.VolumeCapability{mountCap(csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY)}
	r, err := h.ctrl.CreateVolume(ctx, req)
	require.NoError(t, err)
	assert.EqualValues(t, 4<<20, r.GetVolume().GetCapacityBytes(), "a clone without a size takes its source's")
	r2, err := h.ctrl.CreateVolume(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, r.GetVolume().GetVolumeId(), r2.GetVolume().GetVolumeId())

	// Internal snapshots are not CSI snapshots.
	snaps, err := h.ctrl.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{})
	require.NoError(t, err)
	assert.Empty(t, snaps.GetEntries())

	require.NoError(t, h.deleteVolume(src.GetVolumeId()))
	assert.Len(t, h.imageNames(), 2)
	require.NoError(t, h.deleteVolume(r.GetVolume().GetVolumeId()))
	assert.Empty(t, h.imageNames())

	// A source smaller than the limit.
	src = h.createVolume("src2", 8<<20)
	req = h.volReq("clone2", 1<<20)
	req.CapacityRange.LimitBytes = 4 << 20
	req.VolumeContentSource = &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Volume{
		Volume: &csipb.VolumeContentSource_VolumeSource{VolumeId: src.GetVolumeId()}}}
	_, err = h.ctrl.CreateVolume(ctx, req)
	assert.Equal(t, codes.OutOfRange, code(err), "%v", err)
	// Sources that do not exist.
	req.CapacityRange.LimitBytes = 0
	req.VolumeContentSource.GetVolume().VolumeId = "nope"
	_, err = h.ctrl.CreateVolume(ctx, req)
	assert.Equal(t, codes.NotFound, code(err))
	req.VolumeContentSource = &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
		Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: csi.SnapshotID{ClusterID: testCluster, Pool: h.pool, ImageID: "1", Snap: "x"}.String()}}}
	_, err = h.ctrl.CreateVolume(ctx, req)
	assert.Equal(t, codes.NotFound, code(err))
}

func TestSnapshotNames(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	a := h.createVolume("a", 1<<20)
	b := h.createVolume("b", 1<<20)
	s := h.createSnapshot("snap", a.GetVolumeId())
	s2 := h.createSnapshot("snap", a.GetVolumeId())
	assert.Equal(t, s.GetSnapshotId(), s2.GetSnapshotId())
	_, err := h.ctrl.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{Name: "snap", SourceVolumeId: b.GetVolumeId(), Secrets: secrets()})
	assert.Equal(t, codes.AlreadyExists, code(err), "%v", err)
	require.NoError(t, h.deleteSnapshot(s.GetSnapshotId()))
	require.NoError(t, h.deleteSnapshot(s.GetSnapshotId()))
	sb := h.createSnapshot("snap", b.GetVolumeId())
	assert.NotEqual(t, s.GetSnapshotId(), sb.GetSnapshotId())

	for _, tc := range []struct {
		params map[string]string
		code   codes.Code
	}{
		{map[string]string{"snapshotNamePrefix": "x-", "clusterID": testCluster, "pool": "rbd",
			"csi.storage.k8s.io/snapshotter-secret-name": "s", "csi.storage.k8s.io/volumesnapshot/name": "n"}, codes.OK},
		{map[string]string{"snapshotNamePrefix": "purerbd-clone-x"}, codes.InvalidArgument},
		{map[string]string{"mystery": "1"}, codes.InvalidArgument},
		{map[string]string{"clusterID": "elsewhere"}, codes.InvalidArgument},
	} {
		_, err := h.ctrl.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{Name: "p", SourceVolumeId: a.GetVolumeId(), Parameters: tc.params, Secrets: secrets()})
		assert.Equal(t, tc.code, code(err), "%v: %v", tc.params, err)
	}
	_, err = h.ctrl.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{Name: "p2", SourceVolumeId: "bogus", Secrets: secrets()})
	assert.Equal(t, codes.NotFound, code(err))
}

func TestListPagination(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	want := map[string]bool{}
	for i := 0; i < 7; i++ {
		v := h.createVolume(fmt.Sprintf("vol-%d", i), 1<<20)
		want[v.GetVolumeId()] = true
		h.createSnapshot(fmt.Sprintf("snap-%d", i), v.GetVolumeId())
	}
	got := map[string]bool{}
	tok := ""
	pages := 0
	for {
		r, err := h.ctrl.ListVolumes(ctx, &csipb.ListVolumesRequest{MaxEntries: 3, StartingToken: tok})
		require.NoError(t, err)
		pages++
		for _, e := range r.GetEntries() {
			assert.False(t, got[e.GetVolume().GetVolumeId()], "duplicate")
			got[e.GetVolume().GetVolumeId()] = true
			assert.EqualValues(t, 1<<20, e.GetVolume().GetCapacityBytes())
		}
		if tok = r.GetNextToken(); tok == "" {
			break
		}
		// Deleting the last listed volume must not break the token.
		last := r.GetEntries()[len(r.GetEntries())-1].GetVolume().GetVolumeId()
		require.NoError(t, h.deleteVolume(last))
	}
	assert.Equal(t, 3, pages)
	assert.Equal(t, want, got)

	var snaps []string
	tok = ""
	for {
		r, err := h.ctrl.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{MaxEntries: 2, StartingToken: tok, Secrets: secrets()})
		require.NoError(t, err)
		for _, e := range r.GetEntries() {
			snaps = append(snaps, e.GetSnapshot().GetSnapshotId())
		}
		if tok = r.GetNextToken(); tok == "" {
			break
		}
	}
	assert.Len(t, snaps, 7, "snapshots of deleted volumes are still listed")
	assert.True(t, sort.StringsAreSorted(snaps))

	for _, bad := range []string{"invalid-token", "aGVsbG8"} {
		_, err := h.ctrl.ListVolumes(ctx, &csipb.ListVolumesRequest{StartingToken: bad})
		assert.Equal(t, codes.Aborted, code(err))
		_, err = h.ctrl.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{StartingToken: bad})
		assert.Equal(t, codes.Aborted, code(err))
	}
	_, err := h.ctrl.ListVolumes(ctx, &csipb.ListVolumesRequest{MaxEntries: -1})
	assert.Equal(t, codes.InvalidArgument, code(err))
}

func TestExpandVolume(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	v := h.createVolume("grow", 8<<20)
	r, err := h.ctrl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{
		VolumeId: v.GetVolumeId(), CapacityRange: &csipb.CapacityRange{RequiredBytes: 16<<20 + 1}, Secrets: secrets(),
		VolumeCapability: mountCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)})
	require.NoError(t, err)
	assert.EqualValues(t, 16<<20+4096, r.GetCapacityBytes())
	assert.True(t, r.GetNodeExpansionRequired(), "a filesystem is grown by the node")

	// Without secrets: the plugin's credentials never authorise a change.
	_, err = h.ctrl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{
		VolumeId: v.GetVolumeId(), CapacityRange: &csipb.CapacityRange{RequiredBytes: 32 << 20},
		VolumeCapability: blockCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)

	// Smaller than the volume already is: nothing to do.
	r, err = h.ctrl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{
		VolumeId: v.GetVolumeId(), CapacityRange: &csipb.CapacityRange{RequiredBytes: 1 << 20}, Secrets: secrets(),
		VolumeCapability: blockCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)})
	require.NoError(t, err)
	assert.EqualValues(t, 16<<20+4096, r.GetCapacityBytes())
	assert.False(t, r.GetNodeExpansionRequired())

	g, err := h.ctrl.ControllerGetVolume(ctx, &csipb.ControllerGetVolumeRequest{VolumeId: v.GetVolumeId()})
	require.NoError(t, err)
	assert.EqualValues(t, 16<<20+4096, g.GetVolume().GetCapacityBytes())

	_, err = h.ctrl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{
		VolumeId: "nope", CapacityRange: &csipb.CapacityRange{RequiredBytes: 1}})
	assert.Equal(t, codes.NotFound, code(err))
}

func TestGetCapacityAndValidate(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	r, err := h.ctrl.GetCapacity(ctx, &csipb.GetCapacityRequest{Parameters: map[string]string{"pool": "rbd"}})
	require.NoError(t, err)
	assert.EqualValues(t, 100<<30, r.GetAvailableCapacity())
	r, err = h.ctrl.GetCapacity(ctx, &csipb.GetCapacityRequest{})
	require.NoError(t, err)
	assert.Zero(t, r.GetAvailableCapacity())
	_, err = h.ctrl.GetCapacity(ctx, &csipb.GetCapacityRequest{Parameters: map[string]string{"pool": "rbd", "x": "y"}})
	assert.Equal(t, codes.InvalidArgument, code(err))

	v := h.createVolume("v", 1<<20)
	vr, err := h.ctrl.ValidateVolumeCapabilities(ctx, &csipb.ValidateVolumeCapabilitiesRequest{VolumeId: v.GetVolumeId(),
		VolumeCapabilities: []*csipb.VolumeCapability{blockCap(csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}, Secrets: secrets()})
	require.NoError(t, err)
	assert.NotNil(t, vr.GetConfirmed())
	vr, err = h.ctrl.ValidateVolumeCapabilities(ctx, &csipb.ValidateVolumeCapabilitiesRequest{VolumeId: v.GetVolumeId(),
		VolumeCapabilities: []*csipb.VolumeCapability{mountCap(csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}})
	require.NoError(t, err)
	assert.Nil(t, vr.GetConfirmed())
	assert.Contains(t, vr.GetMessage(), "block volumes only")
}

func TestIDTooLongRefused(t *testing.T) {
	long := strings.Repeat("c", 90)
	h := newHarness(t, harnessOpts{configJSON: `[{"clusterID": "` + long + `", "monitors": ["a:1"]}]`})
	h.store.AddCluster(long, map[string]string{testUser: testKey})
	h.store.AddPool(long, "rbd", 1)
	req := h.volReq("v", 1<<20)
	req.Parameters["clusterID"] = long
	_, err := h.ctrl.CreateVolume(context.Background(), req)
	require.Equal(t, codes.InvalidArgument, code(err))
	assert.Contains(t, status.Convert(err).Message(), "longer than 128 bytes")
	assert.Empty(t, h.store.Images(long), "nothing made")
}

// TestProbe: Probe is about the process. A controller whose cluster is
// unreachable is ready (a liveness probe must not restart it in a loop),
// says so in a warning, and logs the change once, however often the
// cluster is checked; the cluster's coming back is logged once too.
func TestProbe(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	probe := func(h *harness) (bool, []string) {
		t.Helper()
		var md metadata.MD
		r, err := h.ident.Probe(ctx, &csipb.ProbeRequest{}, grpc.Trailer(&md))
		require.NoError(t, err)
		return r.GetReady().GetValue(), md.Get(csi.ProbeWarningKey)
	}
	st, err := h.drv.CheckClusters(ctx)
	require.NoError(t, err)
	require.Len(t, st, 1)
	assert.True(t, st[0].Reachable)
	ready, warnings := probe(h)
	assert.True(t, ready)
	assert.Empty(t, warnings)

	h.store.SetDown(testCluster, true)
	for range 3 {
		st, err = h.drv.CheckClusters(ctx)
		require.NoError(t, err)
	}
	require.Len(t, st, 1)
	assert.Equal(t, testCluster, st[0].ClusterID)
	assert.False(t, st[0].Reachable)
	assert.Contains(t, st[0].Error, "cluster unavailable")
	assert.False(t, st[0].Checked.Before(st[0].Since), "checked %v, unreachable since %v", st[0].Checked, st[0].Since)
	assert.Equal(t, st, h.drv.ClusterStatus())
	ready, warnings = probe(h)
	assert.True(t, ready, "an unreachable cluster does not make the plugin unready")
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0], `cluster "`+testCluster+`" unreachable since`)
	logs := h.logs.String()
	assert.Equal(t, 1, strings.Count(logs, `msg="cluster unreachable"`), "logged once, on the change:\n%s", logs)
	assert.Contains(t, logs, `msg="cluster unreachable" clusterID=`+testCluster)

	h.store.SetDown(testCluster, false)
	st, err = h.drv.CheckClusters(ctx)
	require.NoError(t, err)
	assert.True(t, st[0].Reachable)
	_, warnings = probe(h)
	assert.Empty(t, warnings)
	assert.Equal(t, 1, strings.Count(h.logs.String(), `msg="cluster reachable again" clusterID=`+testCluster))

	// Without plugin credentials the monitors' reachability is checked;
	// a cluster config that no longer loads is a warning, not unreadiness.
	h2 := newHarness(t, harnessOpts{noPluginCreds: true})
	h2.store.SetDown(testCluster, true)
	st, err = h2.drv.CheckClusters(ctx)
	require.NoError(t, err)
	assert.False(t, st[0].Reachable)
	ready, _ = probe(h2)
	assert.True(t, ready)
	require.NoError(t, os.WriteFile(filepath.Join(h2.dir, "config.json"), []byte("{"), 0o600))
	_, err = h2.drv.CheckClusters(ctx)
	assert.Error(t, err)
	ready, warnings = probe(h2)
	assert.True(t, ready)
	assert.Contains(t, strings.Join(warnings, "\n"), "cluster config")
	assert.Contains(t, h2.logs.String(), `msg="cluster config unusable"`)
	_, err = h2.ctrl.ListVolumes(ctx, &csipb.ListVolumesRequest{})
	assert.Equal(t, codes.FailedPrecondition, code(err))

	info, err := h.ident.GetPluginInfo(ctx, &csipb.GetPluginInfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, "rbd.purerbd.io", info.GetName())
	assert.Equal(t, "test", info.GetVendorVersion())
	caps, err := h.ident.GetPluginCapabilities(ctx, &csipb.GetPluginCapabilitiesRequest{})
	require.NoError(t, err)
	assert.Len(t, caps.GetCapabilities(), 5, "controller service, snapshot metadata service, group controller service, accessibility constraints and online expansion")
}

// TestSecretsStayOutOfErrorsAndLogs sends a wrong key and a right one and
// checks neither appears in any error or log line.
func TestSecretsStayOutOfErrorsAndLogs(t *testing.T) {
	h := newHarness(t, harnessOpts{noPluginCreds: true})
	ctx := context.Background()
	wrong := "AQDwrongwrongwrongwrongwrongwrongwrong0=="
	req := h.volReq("v", 1<<20)
	req.Secrets = map[string]string{"userID": testUser, "userKey": wrong}
	_, err := h.ctrl.CreateVolume(ctx, req)
	require.Equal(t, codes.Unauthenticated, code(err), "%v", err)
	assert.NotContains(t, err.Error(), wrong)

	req.Secrets = map[string]string{"userID": testUser}
	_, err = h.ctrl.CreateVolume(ctx, req)
	assert.Equal(t, codes.InvalidArgument, code(err))
	req.Secrets = nil
	_, err = h.ctrl.CreateVolume(ctx, req)
	assert.Equal(t, codes.InvalidArgument, code(err))
	assert.Contains(t, err.Error(), "userKey")

	v := h.createVolume("ok", 1<<20)
	require.NoError(t, h.deleteVolume(v.GetVolumeId()))
	logs := h.logs.String()
	assert.NotContains(t, logs, wrong)
	assert.NotContains(t, logs, testKey)
	assert.Contains(t, logs, "CreateVolume", "calls are logged")

	c := csi.Credentials{ID: "admin", Key: testKey}
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s %q", c, c, c, c, c), fmt.Sprint(&c)} {
		assert.NotContains(t, s, testKey)
		assert.Contains(t, s, "client.admin")
	}
}
