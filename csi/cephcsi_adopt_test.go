package csi_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi"
)

// adoptHarness lays out ceph-csi volumes in the fake store the way
// ceph-csi's journal code writes them (ceph/ceph-csi
// internal/journal/voljournal.go, ReserveName).
type adoptHarness struct {
	*harness
	ns string
}

func poolHex(id int64) string { return fmt.Sprintf("%016x", uint64(id)) }

// volume reserves and creates a ceph-csi volume whose journal pool is
// journalPool, in the instance's directory, and returns its handle.
func (a adoptHarness) volume(instance, reqName, uuid string, journalPool int64, extra map[string]string) (string, string) {
	t := a.t
	image := "csi-vol-" + uuid
	obj := "csi.volume." + uuid
	dirVal := uuid
	if journalPool != a.pool {
		dirVal = poolHex(a.pool) + "/" + uuid
	}
	require.NoError(t, a.store.SetOmap(testCluster, a.pool, a.ns, obj, nil))
	require.NoError(t, a.store.SetOmap(testCluster, journalPool, a.ns, "csi.volumes."+instance, map[string]string{"csi.volume." + reqName: dirVal}))
	kv := map[string]string{"csi.volname": reqName, "csi.imagename": image}
	if journalPool != a.pool {
		kv["csi.journalpool"] = poolHex(journalPool)
	}
	for k, v := range extra {
		kv[k] = v
	}
	// As ReserveName does: the keys go to the journal pool's object.
	require.NoError(t, a.store.SetOmap(testCluster, journalPool, a.ns, obj, kv))
	s, err := a.store.Session(context.Background(), csi.Cluster{ID: testCluster}, csi.Credentials{ID: testUser, Key: testKey})
	require.NoError(t, err)
	require.NoError(t, s.CreateImage(context.Background(), csi.ImageRef{Pool: a.pool, Namespace: a.ns, Name: image}, 1<<20, csi.ImageOptions{}))
	return csi.CephCSIID{ClusterID: testCluster, Pool: a.pool, UUID: uuid}.String(), image
}

// TestCephCSIJournalLayouts deletes ceph-csi volumes of a RADOS namespace
// and another instance ID, with the journal in the image pool and in a
// pool of its own, and checks what is left is what ceph-csi leaves.
func TestCephCSIJournalLayouts(t *testing.T) {
	h := newHarness(t, harnessOpts{configJSON: `[{"clusterID": "` + testCluster + `", "monitors": ["127.0.0.1:3300"], "rbd": {"radosNamespace": "team-a"}}]`})
	a := adoptHarness{harness: h, ns: "team-a"}
	h.store.AddNamespace(testCluster, h.pool, "team-a")
	jpool := h.store.AddPool(testCluster, "journal", 1<<30)
	h.store.AddNamespace(testCluster, jpool, "team-a")

	// The journal in the image pool, instance "default": everything goes.
	handle, image := a.volume("default", "pvc-1", "11111111-2222-4333-8444-555555555555", h.pool, nil)
	_, err := h.ctrl.ValidateVolumeCapabilities(context.Background(), &csipb.ValidateVolumeCapabilitiesRequest{
		VolumeId: handle, VolumeCapabilities: []*csipb.VolumeCapability{mountCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}, Secrets: secrets()})
	require.NoError(t, err)
	require.NoError(t, h.deleteVolume(handle))
	assert.NotContains(t, h.imageNames(), image)
	_, ok := h.store.Omap(testCluster, h.pool, "team-a", "csi.volume.11111111-2222-4333-8444-555555555555")
	assert.False(t, ok)
	dir, _ := h.store.Omap(testCluster, h.pool, "team-a", "csi.volumes.default")
	assert.NotContains(t, dir, "csi.volume.pvc-1")

	// A journal pool of its own: the entry in the image pool reads as
	// empty, as it does for ceph-csi; the image is found by its default
	// name, removed with the image pool's object, and the journal pool's
	// keys stay, as ceph-csi leaves them.
	handle, image = a.volume("default", "pvc-2", "21111111-2222-4333-8444-555555555555", jpool, nil)
	require.NoError(t, h.deleteVolume(handle))
	assert.NotContains(t, h.imageNames(), image)
	_, ok = h.store.Omap(testCluster, h.pool, "team-a", "csi.volume.21111111-2222-4333-8444-555555555555")
	assert.False(t, ok)
	dir, _ = h.store.Omap(testCluster, jpool, "team-a", "csi.volumes.default")
	assert.Contains(t, dir, "csi.volume.pvc-2")

	// Another instance's directory is left alone; a key of our instance
	// pointing at another UUID too.
	handle, image = a.volume("other", "pvc-3", "31111111-2222-4333-8444-555555555555", h.pool, nil)
	require.NoError(t, h.store.SetOmap(testCluster, h.pool, "team-a", "csi.volumes.default", map[string]string{"csi.volume.pvc-3": "41111111-2222-4333-8444-555555555555"}))
	require.NoError(t, h.deleteVolume(handle))
	assert.NotContains(t, h.imageNames(), image)
	dir, _ = h.store.Omap(testCluster, h.pool, "team-a", "csi.volumes.other")
	assert.Contains(t, dir, "csi.volume.pvc-3")
	dir, _ = h.store.Omap(testCluster, h.pool, "team-a", "csi.volumes.default")
	assert.Equal(t, "41111111-2222-4333-8444-555555555555", dir["csi.volume.pvc-3"])

	// Encrypted with a KMS other than the secret's passphrase, or with
	// fscrypt: refused, left as it is.
	handle, image = a.volume("default", "pvc-4", "51111111-2222-4333-8444-555555555555", h.pool,
		map[string]string{"csi.volume.encryptKMS": "secrets-metadata", "csi.volume.encryptionType": "block"})
	err = h.deleteVolume(handle)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	assert.Contains(t, h.imageNames(), image)
	handle, image = a.volume("default", "pvc-4f", "52111111-2222-4333-8444-555555555555", h.pool,
		map[string]string{"csi.volume.encryptKMS": "default", "csi.volume.encryptionType": "file"})
	err = h.deleteVolume(handle)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	assert.Contains(t, h.imageNames(), image)
	// LUKS with the passphrase in the secret (ceph-csi's default KMS):
	// served, so deleted like any other.
	handle, image = a.volume("default", "pvc-4d", "53111111-2222-4333-8444-555555555555", h.pool,
		map[string]string{"csi.volume.encryptKMS": "default", "csi.volume.encryptionType": "block"})
	require.NoError(t, h.deleteVolume(handle))
	assert.NotContains(t, h.imageNames(), image)

	// Malformed and unknown handles.
	for _, id := range []string{
		csi.CephCSIID{ClusterID: testCluster, Pool: h.pool, UUID: "61111111-2222-4333-8444-555555555555"}.String(),
		"0001-0004-test-0000000000000001-61111111-2222-4333-8444-55555555555",
	} {
		require.NoError(t, h.deleteVolume(id))
		_, err := h.ctrl.ControllerExpandVolume(context.Background(), &csipb.ControllerExpandVolumeRequest{
			VolumeId: id, CapacityRange: &csipb.CapacityRange{RequiredBytes: 2 << 20}, Secrets: secrets()})
		assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	}
}

// recordingOpener records which image the node asks for, and has none.
type recordingOpener struct{ opened []csi.VolumeID }

func (o *recordingOpener) OpenImage(_ context.Context, _ csi.Cluster, _ csi.Credentials, vol csi.VolumeID, _ csi.OpenImageOptions) (csi.NodeImage, error) {
	o.opened = append(o.opened, vol)
	return nil, fmt.Errorf("image %s: %w", vol.Image, csi.ErrNotFound)
}

// TestNodeStageCephCSIVolumes checks which image NodeStage opens for a
// ceph-csi handle (through the journal, in the cluster's namespace) and
// for a static volume, and the codes of what it refuses.
func TestNodeStageCephCSIVolumes(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	a := adoptHarness{harness: h, ns: "team-a"}
	h.store.AddNamespace(testCluster, h.pool, "team-a")
	handle, image := a.volume("default", "pvc-n", "71111111-2222-4333-8444-555555555555", h.pool, nil)
	enc, _ := a.volume("default", "pvc-e", "81111111-2222-4333-8444-555555555555", h.pool, map[string]string{"csi.volume.encryptKMS": "vault"})
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(conf, []byte(`[{"clusterID":"`+testCluster+`","monitors":["10.0.0.1:3300"],"rbd":{"radosNamespace":"team-a"}}]`), 0o644))
	op := &recordingOpener{}
	n, err := csi.NewNodeServer(csi.NodeConfig{NodeID: "node-1", ClusterConfigPath: conf, Opener: op, Store: h.store, StateDir: filepath.Join(dir, "state")})
	require.NoError(t, err)
	stage := func(id string, volCtx map[string]string) error {
		_, err := n.NodeStageVolume(context.Background(), &csipb.NodeStageVolumeRequest{
			VolumeId: id, StagingTargetPath: filepath.Join(dir, "staging"), VolumeContext: volCtx, Secrets: secrets(),
			VolumeCapability: mountCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)})
		return err
	}

	require.Equal(t, codes.NotFound, status.Code(stage(handle, nil)))
	require.Equal(t, []csi.VolumeID{{ClusterID: testCluster, Pool: h.pool, Namespace: "team-a", Image: image}}, op.opened)
	static := map[string]string{"staticVolume": "true", "clusterID": testCluster, "pool": "rbd", "imageFeatures": "layering"}
	require.Equal(t, codes.NotFound, status.Code(stage("my-static-image", static)))
	assert.Equal(t, csi.VolumeID{ClusterID: testCluster, Pool: h.pool, Namespace: "team-a", Image: "my-static-image"}, op.opened[1])
	static["radosNamespace"] = ""
	require.Equal(t, codes.NotFound, status.Code(stage("my-static-image", static)))
	assert.Equal(t, csi.VolumeID{ClusterID: testCluster, Pool: h.pool, Image: "my-static-image"}, op.opened[2])

	for name, c := range map[string]struct {
		id     string
		volCtx map[string]string
		want   codes.Code
	}{
		"encrypted":           {enc, nil, codes.FailedPrecondition},
		"no journal entry":    {csi.CephCSIID{ClusterID: testCluster, Pool: h.pool, UUID: "91111111-2222-4333-8444-555555555555"}.String(), nil, codes.NotFound},
		"unknown cluster":     {csi.CephCSIID{ClusterID: "other", Pool: h.pool, UUID: "91111111-2222-4333-8444-555555555555"}.String(), nil, codes.NotFound},
		"static without pool": {"img", map[string]string{"staticVolume": "true", "clusterID": testCluster}, codes.InvalidArgument},
		"static bad bool":     {"img", map[string]string{"staticVolume": "yes please", "clusterID": testCluster, "pool": "rbd"}, codes.InvalidArgument},
		"static bad handle":   {"my image", map[string]string{"staticVolume": "true", "clusterID": testCluster, "pool": "rbd"}, codes.InvalidArgument},
		"static no such pool": {"img", map[string]string{"staticVolume": "true", "clusterID": testCluster, "pool": "nope"}, codes.NotFound},
		"not static, no ID":   {"img", map[string]string{"staticVolume": "false"}, codes.NotFound},
	} {
		err := stage(c.id, c.volCtx)
		assert.Equal(t, c.want, status.Code(err), "%s: %v", name, err)
	}
	assert.Len(t, op.opened, 3, "nothing refused reached the opener")
}

// snapshot makes a ceph-csi snapshot of the volume image src as ceph-csi's
// CreateSnapshot does (doSnapshotClone: the snapshot's own image, a clone
// of src, carrying one RBD snapshot named like it) with its journal
// entry, and returns its handle.
func (a adoptHarness) snapshot(reqName, uuid, src string) string {
	t := a.t
	ctx := context.Background()
	image := "csi-snap-" + uuid
	s, err := a.store.Session(ctx, csi.Cluster{ID: testCluster}, csi.Credentials{ID: testUser, Key: testKey})
	require.NoError(t, err)
	srcRef := csi.ImageRef{Pool: a.pool, Namespace: a.ns, Name: src}
	ref := csi.ImageRef{Pool: a.pool, Namespace: a.ns, Name: image}
	require.NoError(t, s.CreateSnapshot(ctx, srcRef, image))
	require.NoError(t, s.CloneImage(ctx, srcRef, image, ref, csi.ImageOptions{}))
	require.NoError(t, s.CreateSnapshot(ctx, ref, image))
	require.NoError(t, a.store.SetOmap(testCluster, a.pool, a.ns, "csi.snaps.default", map[string]string{"csi.snap." + reqName: uuid}))
	require.NoError(t, a.store.SetOmap(testCluster, a.pool, a.ns, "csi.snap."+uuid,
		map[string]string{"csi.snapname": reqName, "csi.imagename": image, "csi.source": src}))
	return csi.CephCSIID{ClusterID: testCluster, Pool: a.pool, UUID: uuid}.String()
}

// TestListCephCSIVolumes lists ceph-csi's volumes and snapshots by their
// handles beside purerbd's own: ListVolumes, ListSnapshots unfiltered
// and by source, across pages, and after the ceph-csi volume is deleted
// while a purerbd snapshot keeps its image as a tombstone. Entries
// outside the cluster's radosNamespace (their handles would not find
// them) and encrypted volumes are not listed.
func TestListCephCSIVolumes(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOpts{trash: true, configJSON: `[{"clusterID": "` + testCluster + `", "monitors": ["127.0.0.1:3300"], "rbd": {"radosNamespace": "team-a"}}]`})
	h.store.AddNamespace(testCluster, h.pool, "team-a")
	a := adoptHarness{harness: h, ns: "team-a"}
	vol, volImage := a.volume("default", "pvc-l", "a1111111-2222-4333-8444-555555555555", h.pool, nil)
	a.volume("default", "pvc-enc", "a2111111-2222-4333-8444-555555555555", h.pool, map[string]string{"csi.volume.encryptKMS": "vault"})
	adoptHarness{harness: h}.volume("default", "pvc-elsewhere", "a3111111-2222-4333-8444-555555555555", h.pool, nil)
	snap := a.snapshot("snapshot-l", "b1111111-2222-4333-8444-555555555555", volImage)
	own := h.createVolume("pvc-own", 1<<20)
	psnap := h.createSnapshot("snapshot-own", vol)
	ownSnap := h.createSnapshot("snapshot-of-own", own.GetVolumeId())

	listVolumes := func() map[string]int64 {
		got := map[string]int64{}
		tok := ""
		for {
			r, err := h.ctrl.ListVolumes(ctx, &csipb.ListVolumesRequest{MaxEntries: 1, StartingToken: tok})
			require.NoError(t, err)
			require.LessOrEqual(t, len(r.GetEntries()), 1)
			for _, e := range r.GetEntries() {
				got[e.GetVolume().GetVolumeId()] = e.GetVolume().GetCapacityBytes()
			}
			if tok = r.GetNextToken(); tok == "" {
				return got
			}
		}
	}
	listSnapshots := func(source string) map[string]string {
		r, err := h.ctrl.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{SourceVolumeId: source, Secrets: secrets()})
		require.NoError(t, err)
		got := map[string]string{}
		for _, e := range r.GetEntries() {
			got[e.GetSnapshot().GetSnapshotId()] = e.GetSnapshot().GetSourceVolumeId()
		}
		return got
	}

	assert.Equal(t, map[string]int64{vol: 1 << 20, own.GetVolumeId(): 1 << 20}, listVolumes())
	assert.Equal(t, map[string]string{snap: vol, psnap.GetSnapshotId(): vol, ownSnap.GetSnapshotId(): own.GetVolumeId()}, listSnapshots(""))
	assert.Equal(t, map[string]string{snap: vol, psnap.GetSnapshotId(): vol}, listSnapshots(vol))
	gs, err := h.ctrl.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{SnapshotId: snap, Secrets: secrets()})
	require.NoError(t, err)
	require.Len(t, gs.GetEntries(), 1)
	assert.Equal(t, vol, gs.GetEntries()[0].GetSnapshot().GetSourceVolumeId())

	// Deleted while purerbd's snapshot and ceph-csi's clone hang from
	// it: no longer a volume; the snapshots are still listed, the
	// purerbd one with the handle the CO knows as its source.
	require.NoError(t, h.deleteVolume(vol))
	assert.Equal(t, map[string]int64{own.GetVolumeId(): 1 << 20}, listVolumes())
	assert.Equal(t, map[string]string{snap: vol, psnap.GetSnapshotId(): vol, ownSnap.GetSnapshotId(): own.GetVolumeId()}, listSnapshots(""))
	require.NoError(t, h.deleteSnapshot(snap))
	assert.Equal(t, map[string]string{psnap.GetSnapshotId(): vol, ownSnap.GetSnapshotId(): own.GetVolumeId()}, listSnapshots(""))
}
