package rbdstore_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/internal/cephcsifixture"
	"github.com/purerbd/purerbd/csi/rbdstore"
)

// cephCSIJournal lays out ceph-csi's RBD journal in the test cluster's
// pool (package cephcsifixture), failing the test on an error.
type cephCSIJournal struct {
	t    *testing.T
	pool string
}

func (j cephCSIJournal) fixture() cephcsifixture.Journal {
	return cephcsifixture.Journal{Rados: cluster.Rados, Rbd: cluster.Rbd, Pool: j.pool}
}

func newUUID() string { return cephcsifixture.NewUUID() }

// reserve writes the entry of a volume (snapshot: source image set) for
// CO name reqName and returns its UUID and image name.
func (j cephCSIJournal) reserve(reqName, source string, extra map[string]string) (uuid, image string) {
	uuid, image, err := j.fixture().Reserve(testCtx(j.t), reqName, source, extra)
	require.NoError(j.t, err)
	return uuid, image
}

// storeImageID records the image's ID as ceph-csi does after creating it.
func (j cephCSIJournal) storeImageID(obj, image string) {
	require.NoError(j.t, j.fixture().StoreImageID(testCtx(j.t), obj, image))
}

func (j cephCSIJournal) omapKeys(obj string) string {
	out, _ := cluster.Rados(testCtx(j.t), "-p", j.pool, "listomapkeys", obj)
	return string(out)
}

func exportBytes(t *testing.T, spec string) []byte {
	t.Helper()
	f := filepath.Join(t.TempDir(), "export")
	rbdCLI(t, "export", "--no-progress", spec, f)
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	return b
}

// TestCephCSIVolumesOnCeph takes over a volume and a snapshot that
// ceph-csi made (images and journal laid out as ceph-csi lays them out)
// with their ceph-csi handles: the node's resolution finds the image and
// what is written through it is what rbd export reads; the controller
// expands, validates, snapshots, clones and restores from them, and
// deletes them, leaving the journal as ceph-csi's own deletes leave it.
func TestCephCSIVolumesOnCeph(t *testing.T) {
	const size = 8 << 20
	ctx := testCtx(t)
	p := startPlugin(t)
	pool := poolID(t)
	j := cephCSIJournal{t: t, pool: cluster.Pool}
	cl := csiCluster()

	// The volume, as ceph-csi's CreateVolume makes it.
	volUUID, volImage := j.reserve("pvc-adopted", "", nil)
	rbdCLI(t, "create", "--size", "8M", "--image-feature", "layering,exclusive-lock,object-map,fast-diff,deep-flatten", cluster.Pool+"/"+volImage)
	j.storeImageID("csi.volume."+volUUID, volImage)
	volHandle := csi.CephCSIID{ClusterID: cluster.FSID, Pool: pool, UUID: volUUID}.String()

	// The node stages it: resolve the handle, write through the image.
	st := rbdstore.New(rbdstore.Options{})
	defer st.Close()
	se, err := st.Session(ctx, cl, admin())
	require.NoError(t, err)
	vid, err := csi.ResolveVolume(ctx, se, cl, volHandle, map[string]string{"clusterID": cluster.FSID, "pool": cluster.Pool})
	require.NoError(t, err)
	assert.Equal(t, csi.VolumeID{ClusterID: cluster.FSID, Pool: pool, Image: volImage}, vid)
	img, err := st.OpenImage(ctx, cl, admin(), vid, csi.OpenImageOptions{Exclusive: true})
	require.NoError(t, err)
	first := bytes.Repeat([]byte("ceph-csi"), 512)
	_, err = img.WriteAtContext(ctx, first, 1<<20)
	require.NoError(t, err)
	require.NoError(t, img.Flush(ctx))
	require.NoError(t, img.Close())
	want := make([]byte, size)
	copy(want[1<<20:], first)
	require.Equal(t, want, exportBytes(t, cluster.Pool+"/"+volImage), "rbd export of the ceph-csi image")

	// ceph-csi's CreateSnapshot (doSnapshotClone): snapshot the volume,
	// clone it into the snapshot's image, drop the temporary snapshot
	// (clone v2 keeps it in the snapshot trash), snapshot the clone.
	snapUUID, snapImage := j.reserve("snapshot-adopted", volImage, nil)
	rbdCLI(t, "snap", "create", cluster.Pool+"/"+volImage+"@"+snapImage)
	rbdCLI(t, "clone", "--rbd-default-clone-format", "2", "--image-feature", "layering,deep-flatten",
		cluster.Pool+"/"+volImage+"@"+snapImage, cluster.Pool+"/"+snapImage)
	rbdCLI(t, "snap", "rm", cluster.Pool+"/"+volImage+"@"+snapImage)
	rbdCLI(t, "snap", "create", cluster.Pool+"/"+snapImage+"@"+snapImage)
	j.storeImageID("csi.snap."+snapUUID, snapImage)
	snapHandle := csi.CephCSIID{ClusterID: cluster.FSID, Pool: pool, UUID: snapUUID}.String()
	atSnapshot := bytes.Clone(want)

	// Written after the snapshot, through a ceph-csi handle again.
	img, err = st.OpenImage(ctx, cl, admin(), vid, csi.OpenImageOptions{Exclusive: true})
	require.NoError(t, err)
	second := bytes.Repeat([]byte("purerbd!"), 512)
	_, err = img.WriteAtContext(ctx, second, 3<<20)
	require.NoError(t, err)
	require.NoError(t, img.Close())
	copy(want[3<<20:], second)

	// Controller: validate, get, expand.
	caps := []*csipb.VolumeCapability{{
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "ext4"}},
	}}
	vr, err := p.ctrl.ValidateVolumeCapabilities(ctx, &csipb.ValidateVolumeCapabilitiesRequest{VolumeId: volHandle, VolumeCapabilities: caps, Secrets: userSecrets()})
	require.NoError(t, err)
	assert.NotNil(t, vr.GetConfirmed())
	er, err := p.ctrl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{
		VolumeId: volHandle, CapacityRange: &csipb.CapacityRange{RequiredBytes: 2 * size}, Secrets: userSecrets()})
	require.NoError(t, err)
	assert.EqualValues(t, 2*size, er.GetCapacityBytes())
	assert.Contains(t, rbdCLI(t, "info", cluster.Pool+"/"+volImage), "16 MiB")
	want = append(want, make([]byte, size)...)
	gs, err := p.ctrl.GetSnapshot(ctx, &csipb.GetSnapshotRequest{SnapshotId: snapHandle, Secrets: userSecrets()})
	require.NoError(t, err)
	assert.Equal(t, volHandle, gs.GetSnapshot().GetSourceVolumeId())
	assert.EqualValues(t, size, gs.GetSnapshot().GetSizeBytes())

	// A purerbd snapshot of the ceph-csi volume, and volumes restored
	// from the ceph-csi snapshot and cloned from the ceph-csi volume.
	ps, err := p.snapshot(t, "adopted-snap", volHandle)
	require.NoError(t, err)
	assert.Equal(t, volHandle, ps.GetSourceVolumeId())
	gps, err := p.ctrl.GetSnapshot(ctx, &csipb.GetSnapshotRequest{SnapshotId: ps.GetSnapshotId(), Secrets: userSecrets()})
	require.NoError(t, err)
	assert.Equal(t, volHandle, gps.GetSnapshot().GetSourceVolumeId())
	// Listed by their handles: the volume, and both snapshots of it
	// (ceph-csi's and purerbd's) with the volume's handle as source.
	lv, err := p.ctrl.ListVolumes(ctx, &csipb.ListVolumesRequest{})
	require.NoError(t, err)
	var listed []string
	for _, e := range lv.GetEntries() {
		listed = append(listed, e.GetVolume().GetVolumeId())
	}
	assert.Equal(t, []string{volHandle}, listed)
	for _, req := range []*csipb.ListSnapshotsRequest{{SourceVolumeId: volHandle, Secrets: userSecrets()}, {Secrets: userSecrets()}} {
		ls, err := p.ctrl.ListSnapshots(ctx, req)
		require.NoError(t, err)
		sources := map[string]string{}
		for _, e := range ls.GetEntries() {
			sources[e.GetSnapshot().GetSnapshotId()] = e.GetSnapshot().GetSourceVolumeId()
		}
		assert.Equal(t, map[string]string{snapHandle: volHandle, ps.GetSnapshotId(): volHandle}, sources, "ListSnapshots %v", req.GetSourceVolumeId())
	}
	restored, err := p.create(t, "adopted-restored", size, &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
		Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: snapHandle}}})
	require.NoError(t, err)
	clone, err := p.create(t, "adopted-clone", 2*size, &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Volume{
		Volume: &csipb.VolumeContentSource_VolumeSource{VolumeId: volHandle}}})
	require.NoError(t, err)
	fromSnap, err := p.create(t, "adopted-from-psnap", 2*size, fromSnapshot(ps.GetSnapshotId()))
	require.NoError(t, err)
	for id, content := range map[string][]byte{restored.GetVolumeId(): atSnapshot, clone.GetVolumeId(): want, fromSnap.GetVolumeId(): want} {
		v, err := csi.ParseVolumeID(id)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(content, exportBytes(t, cluster.Pool+"/"+v.Image)), "content of %s", v.Image)
	}

	// Refused: an encrypted ceph-csi volume; NOT_FOUND: a handle without
	// a journal entry.
	encUUID, encImage := j.reserve("pvc-encrypted", "", map[string]string{
		"csi.volume.encryptKMS": "vault-test", "csi.volume.encryptionType": "block"})
	rbdCLI(t, "create", "--size", "1M", cluster.Pool+"/"+encImage)
	encHandle := csi.CephCSIID{ClusterID: cluster.FSID, Pool: pool, UUID: encUUID}.String()
	_, err = csi.ResolveVolume(ctx, se, cl, encHandle, nil)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	_, err = p.ctrl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{
		VolumeId: encHandle, CapacityRange: &csipb.CapacityRange{RequiredBytes: size}, Secrets: userSecrets()})
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	ghost := csi.CephCSIID{ClusterID: cluster.FSID, Pool: pool, UUID: newUUID()}.String()
	_, err = csi.ResolveVolume(ctx, se, cl, ghost, nil)
	assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	require.NoError(t, p.deleteVolume(t, ghost))

	// Static volume: the handle is the image name.
	svid, err := csi.ResolveVolume(ctx, se, cl, encImage, map[string]string{"staticVolume": "true", "clusterID": cluster.FSID, "pool": cluster.Pool, "imageFeatures": "layering"})
	require.NoError(t, err)
	assert.Equal(t, csi.VolumeID{ClusterID: cluster.FSID, Pool: pool, Image: encImage}, svid)
	rbdCLI(t, "rm", "--no-progress", cluster.Pool+"/"+encImage)
	rbdRados(t, "-p", cluster.Pool, "rm", "csi.volume."+encUUID)
	rbdRados(t, "-p", cluster.Pool, "rmomapkey", "csi.volumes.default", "csi.volume.pvc-encrypted")

	// Deletes. The ceph-csi snapshot still has a clone: its image stays
	// as a tombstone with its journal entry until the clone goes.
	require.NoError(t, p.deleteSnapshot(t, snapHandle))
	require.NoError(t, p.deleteSnapshot(t, snapHandle), "deleting again keeps the tombstone's journal entry")
	assert.Contains(t, j.omapKeys("csi.snaps.default"), "csi.snap.snapshot-adopted")
	require.NoError(t, p.deleteVolume(t, restored.GetVolumeId()))
	assert.NotContains(t, j.omapKeys("csi.snaps.default"), "csi.snap.snapshot-adopted")
	assert.NotContains(t, rbdCLI(t, "ls", cluster.Pool), snapImage, "the ceph-csi snapshot's image went with its last clone")
	assert.NotContains(t, rbdRados(t, "-p", cluster.Pool, "ls"), "csi.snap."+snapUUID)
	_, err = p.ctrl.GetSnapshot(ctx, &csipb.GetSnapshotRequest{SnapshotId: snapHandle, Secrets: userSecrets()})
	assert.Equal(t, codes.NotFound, status.Code(err))

	// The ceph-csi volume has a purerbd snapshot and a clone: deleted,
	// it stays as a tombstone; its journal entry goes with it.
	require.NoError(t, p.deleteVolume(t, volHandle))
	_, err = csi.ResolveVolume(ctx, se, cl, volHandle, nil)
	assert.NoError(t, err, "the journal entry stays while the tombstone does")
	require.NoError(t, p.deleteVolume(t, clone.GetVolumeId()))
	require.NoError(t, p.deleteVolume(t, fromSnap.GetVolumeId()))
	require.NoError(t, p.deleteSnapshot(t, ps.GetSnapshotId()))
	assert.NotContains(t, rbdCLI(t, "ls", cluster.Pool), volUUID)
	assert.NotContains(t, rbdRados(t, "-p", cluster.Pool, "ls"), volUUID, "the ceph-csi volume's journal object")
	assert.NotContains(t, j.omapKeys("csi.volumes.default"), "csi.volume.pvc-adopted")
	require.NoError(t, p.deleteVolume(t, volHandle), "deleting again")
	assert.Empty(t, images(t))
}

// TestCephCSIVolumeDeleteOnCeph deletes a ceph-csi volume with nothing
// hanging from it: image, journal object and directory key go, as with
// ceph-csi's DeleteVolume, and the directory keeps other volumes' keys.
func TestCephCSIVolumeDeleteOnCeph(t *testing.T) {
	p := startPlugin(t)
	pool := poolID(t)
	j := cephCSIJournal{t: t, pool: cluster.Pool}
	other, _ := j.reserve("pvc-other", "", nil)
	uuid, image := j.reserve("pvc-plain", "", nil)
	rbdCLI(t, "create", "--size", "1M", cluster.Pool+"/"+image)
	h := csi.CephCSIID{ClusterID: cluster.FSID, Pool: pool, UUID: uuid}.String()
	require.NoError(t, p.deleteVolume(t, h))
	assert.NotContains(t, rbdCLI(t, "ls", cluster.Pool), image)
	objs := rbdRados(t, "-p", cluster.Pool, "ls")
	assert.NotContains(t, objs, "csi.volume."+uuid)
	assert.Contains(t, objs, "csi.volume."+other)
	keys := j.omapKeys("csi.volumes.default")
	assert.NotContains(t, keys, "csi.volume.pvc-plain")
	assert.Contains(t, keys, "csi.volume.pvc-other")
	rbdRados(t, "-p", cluster.Pool, "rm", "csi.volume."+other)
	rbdRados(t, "-p", cluster.Pool, "rmomapkey", "csi.volumes.default", "csi.volume.pvc-other")
}

// TestCephCSICloneDeleteOnCeph deletes a volume ceph-csi cloned from a
// volume (internal/rbd/clone.go, doSnapClone: a temporary clone
// NAME-temp of the parent, then NAME cloned from a snapshot of it, both
// temporary snapshots dropped to the clone v2 trash): the volume, its
// temporary clone and its journal entry go, as with ceph-csi's
// DeleteVolume, and then the parent can go too.
func TestCephCSICloneDeleteOnCeph(t *testing.T) {
	p := startPlugin(t)
	pool := poolID(t)
	j := cephCSIJournal{t: t, pool: cluster.Pool}
	spec := func(img string) string { return cluster.Pool + "/" + img }
	clone := func(parentSnap, child string) {
		rbdCLI(t, "clone", "--rbd-default-clone-format", "2", "--image-feature", "layering,deep-flatten", parentSnap, spec(child))
	}
	parentUUID, parent := j.reserve("pvc-parent", "", nil)
	rbdCLI(t, "create", "--size", "4M", spec(parent))
	childUUID, child := j.reserve("pvc-child", "", nil)
	temp := child + "-temp"
	rbdCLI(t, "snap", "create", spec(parent)+"@"+temp)
	clone(spec(parent)+"@"+temp, temp)
	rbdCLI(t, "snap", "rm", spec(parent)+"@"+temp)
	rbdCLI(t, "snap", "create", spec(temp)+"@"+temp)
	clone(spec(temp)+"@"+temp, child)
	rbdCLI(t, "snap", "rm", spec(temp)+"@"+temp)
	require.Contains(t, rbdCLI(t, "ls", cluster.Pool), temp)

	require.NoError(t, p.deleteVolume(t, csi.CephCSIID{ClusterID: cluster.FSID, Pool: pool, UUID: childUUID}.String()))
	names := rbdCLI(t, "ls", cluster.Pool)
	assert.NotContains(t, names, child)
	assert.NotContains(t, names, temp, "the temporary clone")
	assert.NotContains(t, rbdRados(t, "-p", cluster.Pool, "ls"), "csi.volume."+childUUID)
	require.NoError(t, p.deleteVolume(t, csi.CephCSIID{ClusterID: cluster.FSID, Pool: pool, UUID: parentUUID}.String()))
	assert.NotContains(t, rbdCLI(t, "ls", cluster.Pool), parentUUID)
	keys := j.omapKeys("csi.volumes.default")
	assert.NotContains(t, keys, "csi.volume.pvc-parent")
	assert.NotContains(t, keys, "csi.volume.pvc-child")
}
