package rbdstore_test

import (
	"bytes"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/rbdstore"
)

// TestSingleWriterOnOneNodeOnCeph opens a single-writer volume as two
// nodes' plugins do at NodeStage (two stores: two rados clients, two
// node IDs): the second node is refused with ErrBusy (FAILED_PRECONDITION
// at NodeStage) naming the first, while the controller can still
// snapshot and grow the volume; a restarted plugin of the first node
// takes its own claim back; once the first node closes (NodeUnstage) the
// second stages.
func TestSingleWriterOnOneNodeOnCeph(t *testing.T) {
	ctx := testCtx(t)
	p := startPlugin(t)
	v, err := p.create(t, "rwo", 8<<20, nil)
	require.NoError(t, err)
	vid, err := csi.ParseVolumeID(v.GetVolumeId())
	require.NoError(t, err)
	spec := cluster.Pool + "/" + vid.Image
	rwo := func(node string) csi.OpenImageOptions { return csi.OpenImageOptions{Exclusive: true, Node: node} }

	nodeA := rbdstore.New(rbdstore.Options{})
	defer nodeA.Close()
	nodeB := rbdstore.New(rbdstore.Options{})
	defer nodeB.Close()

	a, err := nodeA.OpenImage(ctx, csiCluster(), admin(), vid, rwo("node-a"))
	require.NoError(t, err)
	assert.Contains(t, rbdCLI(t, "image-meta", "get", spec, rbdstore.NodeClaimKey), "node-a client.")
	data := bytes.Repeat([]byte("node-a!!"), 512)
	_, err = a.WriteAtContext(ctx, data, 0)
	require.NoError(t, err)

	_, err = nodeB.OpenImage(ctx, csiCluster(), admin(), vid, rwo("node-b"))
	require.ErrorIs(t, err, csi.ErrBusy)
	assert.Contains(t, err.Error(), `in use by node "node-a"`)
	t.Logf("second node refused: %v", err)
	assert.Contains(t, rbdCLI(t, "image-meta", "get", spec, rbdstore.NodeClaimKey), "node-a client.", "the refused node left the claim alone")

	// Readers and multi-node writers are not single writers: no claim.
	ro, err := nodeB.OpenImage(ctx, csiCluster(), admin(), vid, csi.OpenImageOptions{ReadOnly: true, Node: "node-b"})
	require.NoError(t, err)
	require.NoError(t, ro.Close())

	// The controller still snapshots and grows the staged volume, and
	// node A goes on writing.
	s, err := p.snapshot(t, "rwo-snap", v.GetVolumeId())
	require.NoError(t, err)
	_, err = p.ctrl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{
		VolumeId: v.GetVolumeId(), CapacityRange: &csipb.CapacityRange{RequiredBytes: 16 << 20}, Secrets: userSecrets()})
	require.NoError(t, err)
	_, err = a.WriteAtContext(ctx, data, 1<<20)
	require.NoError(t, err)
	require.NoError(t, a.Flush(ctx))
	_, err = nodeB.OpenImage(ctx, csiCluster(), admin(), vid, rwo("node-b"))
	require.ErrorIs(t, err, csi.ErrBusy, "still refused after the controller's operations")

	// Node A's plugin restarts (its old client still watches, as after
	// SIGKILL): its new process takes the volume back.
	nodeA2 := rbdstore.New(rbdstore.Options{})
	defer nodeA2.Close()
	a2, err := nodeA2.OpenImage(ctx, csiCluster(), admin(), vid, rwo("node-a"))
	require.NoError(t, err)
	require.NoError(t, a.Close())
	assert.Contains(t, rbdCLI(t, "image-meta", "get", spec, rbdstore.NodeClaimKey), "node-a client.",
		"closing the old open left the new process's claim")
	_, err = nodeB.OpenImage(ctx, csiCluster(), admin(), vid, rwo("node-b"))
	require.ErrorIs(t, err, csi.ErrBusy)

	// NodeUnstage on node A: node B stages.
	require.NoError(t, a2.Close())
	out, err := cluster.Rbd(ctx, "image-meta", "get", spec, rbdstore.NodeClaimKey)
	assert.Error(t, err, "the claim is gone after unstage: %s", out)
	b, err := nodeB.OpenImage(ctx, csiCluster(), admin(), vid, rwo("node-b"))
	require.NoError(t, err)
	buf := make([]byte, len(data))
	_, err = b.ReadAtContext(ctx, buf, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, data, buf)
	assert.Contains(t, rbdCLI(t, "image-meta", "get", spec, rbdstore.NodeClaimKey), "node-b client.")
	require.NoError(t, b.Close())

	// A stale claim (its client gone without unstaging) does not hold
	// the volume.
	rbdCLI(t, "image-meta", "set", spec, rbdstore.NodeClaimKey, "node-dead client.999999")
	b, err = nodeB.OpenImage(ctx, csiCluster(), admin(), vid, rwo("node-b"))
	require.NoError(t, err)
	require.NoError(t, b.Close())

	require.NoError(t, p.deleteSnapshot(t, s.GetSnapshotId()))
	require.NoError(t, p.deleteVolume(t, v.GetVolumeId()))
	assert.False(t, strings.Contains(strings.Join(images(t), " "), vid.Image))
}
