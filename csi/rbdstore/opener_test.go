package rbdstore_test

import (
	"bytes"
	"context"
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
// handed over and back, which the image's lock state (the node's
// metrics) counts, and the store's sessions show the open image. The
// data is checked with rbd export.
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
	lr, ok := img.(lockReporter)
	require.True(t, ok, "the node image reports its lock")
	ls, ok := lr.LockState()
	require.True(t, ok)
	assert.Equal(t, csi.LockState{Owner: true}, ls, "held since the open, never handed over")

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
	ls, _ = lr.LockState()
	assert.True(t, ls.Owner, "taken back for the write")
	assert.GreaterOrEqual(t, ls.Handovers, int64(1), "handed to the controller for the snapshot")
	sessions := st.Sessions()
	require.Len(t, sessions, 1)
	se := sessions[0]
	assert.Equal(t, csiCluster().ID, se.ClusterID)
	assert.Equal(t, "client.admin", se.User)
	assert.Equal(t, 1, se.Images)
	assert.True(t, se.Mon.Connected, "monitor session")
	assert.Positive(t, se.OSD.Requests)
	assert.Positive(t, se.OSD.Sessions)
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
	_, ok = ro.(lockReporter).LockState()
	assert.False(t, ok, "a read-only image has no lock to report")
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

// lockReporter is what the node's metrics ask of an image.
type lockReporter interface {
	LockState() (csi.LockState, bool)
}

// TestLockHoldersOnCeph has a second client (another store, another
// connection) open a single writer's image exclusively while the node
// holds its lock: the node's image hands the lock over, counts the
// handover and names the holder, as `rbd lock ls` shows it, which the
// node's volume health reports.
func TestLockHoldersOnCeph(t *testing.T) {
	ctx := testCtx(t)
	p := startPlugin(t)
	v, err := p.create(t, "locked", 8<<20, nil)
	require.NoError(t, err)
	vid, err := csi.ParseVolumeID(v.GetVolumeId())
	require.NoError(t, err)

	node := rbdstore.New(rbdstore.Options{})
	defer node.Close()
	img, err := node.OpenImage(ctx, csiCluster(), admin(), vid, csi.OpenImageOptions{Exclusive: true})
	require.NoError(t, err)
	defer img.Close()
	holders, err := img.(lockHolders).LockHolders(ctx)
	require.NoError(t, err)
	assert.Empty(t, holders, "the node holds the lock itself")

	other := rbdstore.New(rbdstore.Options{})
	defer other.Close()
	img2, err := other.OpenImage(ctx, csiCluster(), admin(), vid, csi.OpenImageOptions{Exclusive: true})
	require.NoError(t, err)
	defer img2.Close()

	ls, ok := img.(lockReporter).LockState()
	require.True(t, ok)
	assert.Equal(t, csi.LockState{Owner: false, Handovers: 1}, ls)
	holders, err = img.(lockHolders).LockHolders(ctx)
	require.NoError(t, err)
	require.Len(t, holders, 1)
	assert.Contains(t, rbdCLI(t, "lock", "ls", cluster.Pool+"/"+vid.Image), holders[0]+" ", "the holder as rbd names it")
	h2, err := img2.(lockHolders).LockHolders(ctx)
	require.NoError(t, err)
	assert.Empty(t, h2, "the second client holds it itself")
}

type lockHolders interface {
	LockHolders(ctx context.Context) ([]string, error)
}
