package rbdstore_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/rbdstore"
)

// TestOpenImageOnCeph opens a volume as the node service does (single
// writer: exclusive lock taken at open) and, while it is open, has the
// controller snapshot and grow it through the same store: the lock is
// handed over and back. The data is checked with rbd export.
func TestOpenImageOnCeph(t *testing.T) {
	ctx := testCtx(t)
	p := startPlugin(t)
	v, err := p.create(t, "opened", 8<<20, nil)
	require.NoError(t, err)
	vid, err := csi.ParseVolumeID(v.GetVolumeId())
	require.NoError(t, err)

	st := rbdstore.New(rbdstore.Options{})
	defer st.Close()
	img, err := st.OpenImage(ctx, csiCluster(), admin(), vid, csi.OpenImageOptions{Exclusive: true})
	require.NoError(t, err)
	assert.EqualValues(t, 8<<20, img.Size())
	data := bytes.Repeat([]byte("purerbd!"), 512) // 4 KiB
	_, err = img.WriteAtContext(ctx, data, 1<<20)
	require.NoError(t, err)
	require.NoError(t, img.Flush(ctx))
	assert.Contains(t, rbdCLI(t, "lock", "ls", cluster.Pool+"/"+vid.Image), "auto", "the exclusive lock is held")

	// The controller snapshots and grows the open volume.
	s, err := p.snapshot(t, "opened-snap", v.GetVolumeId())
	require.NoError(t, err)
	er, err := p.ctrl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{
		VolumeId: v.GetVolumeId(), CapacityRange: &csipb.CapacityRange{RequiredBytes: 16 << 20}, Secrets: userSecrets()})
	require.NoError(t, err)
	assert.EqualValues(t, 16<<20, er.GetCapacityBytes())

	// The node goes on writing.
	_, err = img.WriteAtContext(ctx, data, 2<<20)
	require.NoError(t, err)
	require.NoError(t, img.Flush(ctx))
	require.NoError(t, img.Close())

	dir := t.TempDir()
	rbdCLI(t, "export", cluster.Pool+"/"+vid.Image, filepath.Join(dir, "head"))
	head, err := os.ReadFile(filepath.Join(dir, "head"))
	require.NoError(t, err)
	assert.Len(t, head, 16<<20)
	assert.Equal(t, data, head[1<<20:1<<20+4096])
	assert.Equal(t, data, head[2<<20:2<<20+4096])
	sid, _ := csi.ParseSnapshotID(s.GetSnapshotId())
	rbdCLI(t, "export", cluster.Pool+"/"+vid.Image+"@"+sid.Snap, filepath.Join(dir, "snap"))
	snap, err := os.ReadFile(filepath.Join(dir, "snap"))
	require.NoError(t, err)
	assert.Len(t, snap, 8<<20)
	assert.Equal(t, data, snap[1<<20:1<<20+4096])
	assert.Equal(t, make([]byte, 4096), snap[2<<20:2<<20+4096], "written after the snapshot")

	// Read-only opens take no lock.
	ro, err := st.OpenImage(ctx, csiCluster(), admin(), vid, csi.OpenImageOptions{ReadOnly: true})
	require.NoError(t, err)
	assert.NotContains(t, rbdCLI(t, "lock", "ls", cluster.Pool+"/"+vid.Image), "auto")
	buf := make([]byte, 4096)
	_, err = ro.ReadAtContext(ctx, buf, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, data, buf)
	require.NoError(t, ro.Close())

	_, err = st.OpenImage(ctx, csiCluster(), admin(), csi.VolumeID{ClusterID: vid.ClusterID, Pool: vid.Pool, Image: "drv-none"}, csi.OpenImageOptions{})
	assert.ErrorIs(t, err, csi.ErrNotFound)

	require.NoError(t, p.deleteSnapshot(t, s.GetSnapshotId()))
	require.NoError(t, p.deleteVolume(t, v.GetVolumeId()))
	assert.False(t, strings.Contains(strings.Join(images(t), " "), vid.Image))
}
