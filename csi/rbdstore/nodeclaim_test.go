package rbdstore_test

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestSingleWriterRaceOnCeph has two nodes (two stores: two rados
// clients) stage the same single-writer volume at the same instant,
// round after round: in every round exactly one wins and the other is
// refused with ErrBusy. Each node is slowed down at random, for up to
// 250 ms, between deciding that it may take the volume and taking it, as
// a loaded node or network would: the claim must not depend on the
// winner finishing within the exclusive lock's minimum hold.
func TestSingleWriterRaceOnCeph(t *testing.T) {
	ctx := testCtx(t)
	image := "race-" + randomHex(4)
	rbdCLI(t, "create", "--size", "8M", cluster.Pool+"/"+image)
	vid := csi.VolumeID{ClusterID: cluster.FSID, Pool: poolID(t), Image: image}

	nodes := []string{"node-a", "node-b"}
	stores := make([]*rbdstore.Store, len(nodes))
	for i := range stores {
		stores[i] = rbdstore.New(rbdstore.Options{})
		defer stores[i].Close()
		rbdstore.SetClaimPause(stores[i], func(string) { time.Sleep(rand.N(250 * time.Millisecond)) })
	}
	const rounds = 50
	doubles := 0
	for round := range rounds {
		start := make(chan struct{})
		imgs := make([]csi.NodeImage, len(nodes))
		errs := make([]error, len(nodes))
		var wg sync.WaitGroup
		for i, node := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				imgs[i], errs[i] = stores[i].OpenImage(ctx, csiCluster(), admin(), vid, csi.OpenImageOptions{Exclusive: true, Node: node})
			}()
		}
		close(start)
		wg.Wait()
		var winners []string
		for i, err := range errs {
			if err == nil {
				winners = append(winners, nodes[i])
				continue
			}
			require.ErrorIs(t, err, csi.ErrBusy, "round %d, %s", round, nodes[i])
		}
		if len(winners) != 1 {
			doubles++
			t.Errorf("round %d: winners %v, want exactly one", round, winners)
		}
		for _, img := range imgs {
			if img != nil {
				require.NoError(t, img.Close())
			}
		}
	}
	t.Logf("%d rounds, %d with more than one winner", rounds, doubles)
	rbdCLI(t, "rm", cluster.Pool+"/"+image)
}
