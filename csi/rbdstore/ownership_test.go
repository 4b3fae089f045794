package rbdstore_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi"
)

func hash32(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:32]
}

// snaps lists an image's snapshot names as librbd sees them.
func snaps(t *testing.T, image string) []string {
	var out []string
	for _, line := range strings.Split(rbdCLI(t, "snap", "ls", cluster.Pool+"/"+image), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 1 {
			out = append(out, f[1])
		}
	}
	return out
}

// foreign makes an image the driver never made, with snapshots, through
// Ceph's own rbd tool, and returns its ID.
func foreign(t *testing.T, name string, snapNames ...string) string {
	rbdCLI(t, "create", "--size", "4M", cluster.Pool+"/"+name)
	t.Cleanup(func() {
		cluster.Rbd(testCtx(t), "snap", "purge", cluster.Pool+"/"+name)
		cluster.Rbd(testCtx(t), "rm", cluster.Pool+"/"+name)
	})
	for _, s := range snapNames {
		rbdCLI(t, "snap", "create", cluster.Pool+"/"+name+"@"+s)
	}
	return info(t, cluster.Pool+"/"+name).ID
}

// TestSweepLeavesForeignImagesOnCeph shares the pool with images and
// snapshots the driver never made, some named like its own, and checks
// that neither sweeps nor crafted volume and snapshot IDs touch them,
// while the driver's own leftovers are still collected.
func TestSweepLeavesForeignImagesOnCeph(t *testing.T) {
	p := startPlugin(t)
	ctx := testCtx(t)

	// What an operator keeps in the same pool.
	foreign(t, "vm-disk-deleted-2024")
	pgID := foreign(t, "postgres", "before-deleted-rows-fix", "purerbd-clone-nothash",
		"drvsnap-"+hash32("x")+"-deleted-1")
	// Look-alikes of the driver's names without its ownership record.
	lookAlike := "drv-" + hash32("look-alike")
	foreign(t, lookAlike, "purerbd-clone-"+hash32("a"))
	tombNoRecord := "drv-" + hash32("tomb-no-record")
	tid := foreign(t, tombNoRecord+"-tmp")
	rbdCLI(t, "rename", cluster.Pool+"/"+tombNoRecord+"-tmp", cluster.Pool+"/"+tombNoRecord+"-deleted-"+tid)
	t.Cleanup(func() { cluster.Rbd(testCtx(t), "rm", cluster.Pool+"/"+tombNoRecord+"-deleted-"+tid) })
	// A record that names another volume than the image's name says,
	// and a tombstone suffix that is not the image's own ID.
	mismatched := "drv-" + hash32("mismatched")
	mid := foreign(t, mismatched+"-tmp")
	rbdCLI(t, "image-meta", "set", cluster.Pool+"/"+mismatched+"-tmp", "purerbd.csi.name", "someone-else")
	rbdCLI(t, "rename", cluster.Pool+"/"+mismatched+"-tmp", cluster.Pool+"/"+mismatched+"-deleted-"+mid)
	t.Cleanup(func() { cluster.Rbd(testCtx(t), "rm", cluster.Pool+"/"+mismatched+"-deleted-"+mid) })
	wrongSuffix := "drv-" + hash32("wrong-suffix")
	foreign(t, wrongSuffix+"-deleted-0123456789ab")
	rbdCLI(t, "image-meta", "set", cluster.Pool+"/"+wrongSuffix+"-deleted-0123456789ab", "purerbd.csi.name", "wrong-suffix")

	// The driver's own leftovers: a tombstone whose snapshots are gone
	// (a crash after the last snapshot went), and an internal clone
	// snapshot no clone uses. The live volume also carries a snapshot an
	// operator took by hand.
	dead, err := p.create(t, "sweep-dead", 4<<20, nil)
	require.NoError(t, err)
	deadID, _ := csi.ParseVolumeID(dead.GetVolumeId())
	deadInfo := info(t, cluster.Pool+"/"+deadID.Image)
	rbdCLI(t, "rename", cluster.Pool+"/"+deadID.Image, cluster.Pool+"/"+deadID.Image+"-deleted-"+deadInfo.ID)
	live, err := p.create(t, "sweep-live", 4<<20, nil)
	require.NoError(t, err)
	liveID, _ := csi.ParseVolumeID(live.GetVolumeId())
	internal := "purerbd-clone-" + hash32("gone clone")
	rbdCLI(t, "snap", "create", cluster.Pool+"/"+liveID.Image+"@"+internal)
	rbdCLI(t, "snap", "create", cluster.Pool+"/"+liveID.Image+"@before-deleted-rows-fix")
	t.Cleanup(func() {
		cluster.Rbd(testCtx(t), "snap", "purge", cluster.Pool+"/"+liveID.Image)
		p.deleteVolume(t, live.GetVolumeId())
	})

	for range 5 {
		require.NoError(t, p.drv.Sweep(ctx))
	}
	names := strings.Fields(rbdCLI(t, "ls", cluster.Pool))
	for _, n := range []string{"vm-disk-deleted-2024", "postgres", lookAlike, tombNoRecord + "-deleted-" + tid,
		mismatched + "-deleted-" + mid, wrongSuffix + "-deleted-0123456789ab", liveID.Image} {
		assert.Contains(t, names, n, "the sweep removed an image")
	}
	assert.Equal(t, []string{"before-deleted-rows-fix", "purerbd-clone-nothash", "drvsnap-" + hash32("x") + "-deleted-1"},
		snaps(t, "postgres"), "the sweep removed a snapshot of an image the driver does not own")
	assert.Equal(t, []string{"purerbd-clone-" + hash32("a")}, snaps(t, lookAlike))
	assert.NotContains(t, names, deadID.Image+"-deleted-"+deadInfo.ID, "the driver's own tombstone was not collected")
	assert.Equal(t, []string{"before-deleted-rows-fix"}, snaps(t, liveID.Image),
		"the internal snapshot should go and the operator's should stay")

	// Crafted IDs naming foreign images and snapshots.
	pool := poolID(t)
	pgVol := csi.VolumeID{ClusterID: cluster.FSID, Pool: pool, Image: "postgres"}.String()
	require.NoError(t, p.deleteVolume(t, pgVol), "a volume the driver does not own is, to the CO, already gone")
	_, err = p.ctrl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{
		VolumeId: pgVol, CapacityRange: &csipb.CapacityRange{RequiredBytes: 64 << 20}, Secrets: userSecrets()})
	assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	_, err = p.snapshot(t, "crafted-snap", pgVol)
	assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	_, err = p.create(t, "crafted-clone", 4<<20, fromVolume(pgVol))
	assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	for _, sn := range []string{"before-deleted-rows-fix", "drvsnap-" + hash32("x") + "-deleted-1"} {
		sid := csi.SnapshotID{ClusterID: cluster.FSID, Pool: pool, ImageID: pgID, Snap: sn}.String()
		require.NoError(t, p.deleteSnapshot(t, sid))
		_, err = p.ctrl.GetSnapshot(ctx, &csipb.GetSnapshotRequest{SnapshotId: sid, Secrets: userSecrets()})
		assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	}
	lookVol := csi.VolumeID{ClusterID: cluster.FSID, Pool: pool, Image: lookAlike}.String()
	require.NoError(t, p.deleteVolume(t, lookVol))
	lv, err := p.ctrl.ListVolumes(ctx, &csipb.ListVolumesRequest{})
	require.NoError(t, err)
	for _, e := range lv.GetEntries() {
		assert.NotEqual(t, lookVol, e.GetVolume().GetVolumeId(), "ListVolumes lists a foreign image")
	}

	names = strings.Fields(rbdCLI(t, "ls", cluster.Pool))
	assert.Contains(t, names, "postgres")
	assert.Contains(t, names, lookAlike)
	assert.EqualValues(t, 4<<20, info(t, cluster.Pool+"/postgres").Size)
	assert.Equal(t, []string{"before-deleted-rows-fix", "purerbd-clone-nothash", "drvsnap-" + hash32("x") + "-deleted-1"}, snaps(t, "postgres"))
	assert.Contains(t, p.logs.String(), "not deleting an image the driver does not own", "refusals are logged")
}
