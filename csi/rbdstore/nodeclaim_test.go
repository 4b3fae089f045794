package rbdstore_test

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	"github.com/purerbd/purerbd/rados/radostest"
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
	header := "rbd_header." + a.(interface{ ID() string }).ID()
	claimLock := func() string {
		out, err := cluster.Rados(ctx, "-p", cluster.Pool, "lock", "info", header, rbdstore.NodeClaimLock)
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	assert.Contains(t, claimLock(), `"cookie":"node-a"`, "the rados tool sees the claim")
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

	assert.NotContains(t, claimLock(), "node-b", "NodeUnstage released the claim")

	// A stale claim (its client gone without unstaging) does not hold
	// the volume: one in the metadata, as older plugins wrote them, and
	// a claim lock whose client (the rados tool) has exited.
	rbdCLI(t, "image-meta", "set", spec, rbdstore.NodeClaimKey, "node-dead client.999999")
	out, err = cluster.Rados(ctx, "-p", cluster.Pool, "lock", "get", header, rbdstore.NodeClaimLock,
		"--lock-cookie", "node-dead", "--lock-tag", "purerbd", "--lock-type", "exclusive")
	require.NoError(t, err, "%s", out)
	assert.Contains(t, claimLock(), `"cookie":"node-dead"`)
	b, err = nodeB.OpenImage(ctx, csiCluster(), admin(), vid, rwo("node-b"))
	require.NoError(t, err)
	assert.Contains(t, claimLock(), `"cookie":"node-b"`)
	assert.NotContains(t, claimLock(), "node-dead")
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

// TestSingleWriterClaimSurvivesNewGlobalIDOnCeph stages a single-writer
// volume on node A, then stops the cluster for longer than the AUTH
// ticket lives: node A's client authenticates anew with another global
// id and re-registers its header watch under it, from the same address.
// Its claim is still alive: node B is refused. Once node A unstages,
// node B stages.
func TestSingleWriterClaimSurvivesNewGlobalIDOnCeph(t *testing.T) {
	const authTTL = 8 * time.Second
	cl := radostest.New(t, radostest.Options{Conf: map[string]string{
		"auth_service_ticket_ttl": fmt.Sprint((authTTL / 2).Seconds()),
		"auth_mon_ticket_ttl":     fmt.Sprint(authTTL.Seconds()),
		// the watch of the old global id goes soon after the restart
		"osd_client_watch_timeout": "10",
	}})
	ctx := testCtx(t)
	spec := cl.Pool + "/reauth"
	out, err := cl.Rbd(ctx, "create", "--size", "8M", spec)
	require.NoError(t, err, "%s", out)
	cc := csi.Cluster{ID: cl.FSID, Monitors: cl.MonAddrs}
	cred := csi.Credentials{ID: "admin", Key: cl.AdminKey}
	vid := csi.VolumeID{ClusterID: cl.FSID, Pool: poolIDOf(t, cl), Image: "reauth"}
	rwo := func(node string) csi.OpenImageOptions { return csi.OpenImageOptions{Exclusive: true, Node: node} }
	watchers := func() []watcher {
		out, err := cl.Rbd(ctx, "status", "--format", "json", spec)
		require.NoError(t, err, "%s", out)
		var st struct{ Watchers []watcher }
		require.NoError(t, json.Unmarshal(out, &st), "%s", out)
		return st.Watchers
	}

	nodeA := rbdstore.New(rbdstore.Options{})
	defer nodeA.Close()
	nodeB := rbdstore.New(rbdstore.Options{})
	defer nodeB.Close()
	a, err := nodeA.OpenImage(ctx, cc, cred, vid, rwo("node-a"))
	require.NoError(t, err)
	before := watchers()
	require.Len(t, before, 1)

	for _, d := range []string{"osd.0", "mon.a"} {
		require.NoError(t, cl.Stop(d))
	}
	time.Sleep(authTTL + 4*time.Second)
	for _, d := range []string{"mon.a", "osd.0"} {
		require.NoError(t, cl.Start(d))
	}
	require.NoError(t, cl.WaitQuorum(ctx))
	require.NoError(t, cl.WaitOSDsUp(ctx))
	var after []watcher
	require.Eventually(t, func() bool {
		after = watchers()
		return len(after) == 1 && after[0].Client != before[0].Client
	}, 90*time.Second, time.Second, "node A's watch under a new global id, and only it")
	require.Equal(t, before[0].Address, after[0].Address)
	t.Logf("node A's client was client.%d, is client.%d now, at %s", before[0].Client, after[0].Client, after[0].Address)

	_, err = nodeB.OpenImage(ctx, cc, cred, vid, rwo("node-b"))
	require.ErrorIs(t, err, csi.ErrBusy, "node A's stage is alive")
	t.Logf("node B refused: %v", err)

	require.NoError(t, a.Close())
	b, err := nodeB.OpenImage(ctx, cc, cred, vid, rwo("node-b"))
	require.NoError(t, err)
	require.NoError(t, b.Close())
}

// watcher is a watcher as `rbd status --format json` prints it.
type watcher struct {
	Address string
	Client  uint64
	Cookie  uint64
}
