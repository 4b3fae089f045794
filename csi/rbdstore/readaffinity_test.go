package rbdstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/rbdstore"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
)

// TestReadAffinity: three OSDs in three CRUSH hosts and a node labelled
// kubernetes.io/hostname=hB (ceph-csi's read affinity with
// --crush-location-labels kubernetes.io/hostname). An image written with
// Ceph's rbd is read through the node's store: every data read goes to
// osd.1, the OSD under host hB, as the OSDs' op_r counters show; a store
// without read affinity reads from the primaries.
func TestReadAffinity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	testCtx(t) // the -short skip
	cl, err := cephcluster.Start(ctx, cephcluster.Options{OSDs: 3, Pool: "-", WithMgr: true})
	require.NoError(t, err)
	defer cl.Close()
	ceph := func(args ...string) {
		t.Helper()
		out, err := cl.Ceph(ctx, args...)
		require.NoError(t, err, "ceph %v: %s", args, out)
	}
	if err := cl.PlaceOSDsInHosts(ctx, "hA", "hB", "hC"); err != nil {
		t.Fatal(err)
	}
	// every request in the OSDs' history (20 by default, the slowest
	// kept), for the diagnosis below
	ceph("config", "set", "osd", "osd_op_history_size", "1000")
	ceph("osd", "pool", "create", "ra", "32", "32", "replicated")
	ceph("osd", "pool", "set", "ra", "size", "3")
	out, err := cl.Rbd(ctx, "pool", "init", "ra")
	require.NoError(t, err, "%s", out)
	require.NoError(t, cl.WaitClean(ctx))
	out, err = cl.Rbd(ctx, "create", "--size", "4M", "--object-size", "64K", "ra/img")
	require.NoError(t, err, "%s", out)
	out, err = cl.Rbd(ctx, "bench", "--io-type", "write", "--io-size", "64K", "--io-total", "4M", "--io-pattern", "seq", "ra/img")
	require.NoError(t, err, "%s", out)

	// A replica serves an object once the next write of its placement
	// group told it every replica has the object (else EAGAIN, and the
	// primary serves it): two later writes in every placement group.
	conn, err := rados.Connect(ctx, rados.Config{MonHost: cl.MonHost(), Key: cl.AdminKey})
	require.NoError(t, err)
	defer conn.Close()
	io, err := conn.IOContext(ctx, "ra", "")
	require.NoError(t, err)
	for round := range 2 {
		pgs := map[uint32]bool{}
		for i := 0; len(pgs) < 32 && i < 5000; i++ {
			oid := fmt.Sprintf("settle-%d-%d", round, i)
			l, err := io.Locate(oid)
			require.NoError(t, err)
			if !pgs[l.PG.Seed] {
				pgs[l.PG.Seed] = true
				require.NoError(t, io.WriteFull(ctx, oid, []byte("x")))
			}
		}
	}
	pool, err := conn.LookupPool(ctx, "ra")
	require.NoError(t, err)

	c := csi.Cluster{ID: cl.FSID, Monitors: cl.MonAddrs}
	vol := csi.VolumeID{ClusterID: c.ID, Pool: pool, Image: "img"}
	cred := csi.Credentials{ID: "admin", Key: cl.AdminKey}
	var readStart time.Time
	readImage := func(st *rbdstore.Store) []int64 {
		img, err := st.OpenImage(ctx, c, cred, vol, csi.OpenImageOptions{ReadOnly: true})
		require.NoError(t, err)
		defer img.Close()
		readStart = time.Now()
		before, err := cl.OSDOpReads(ctx)
		require.NoError(t, err)
		buf := make([]byte, 64<<10)
		for off := int64(0); off < 4<<20; off += int64(len(buf)) {
			_, err := img.ReadAtContext(ctx, buf, off)
			require.NoError(t, err)
		}
		after, err := cl.OSDOpReads(ctx)
		require.NoError(t, err)
		for i := range after {
			after[i] -= before[i]
		}
		return after
	}
	node := rbdstore.New(rbdstore.Options{ReadAffinity: true, CrushLocationLabels: []string{"kubernetes.io/hostname"},
		NodeLabels: map[string]string{"kubernetes.io/hostname": "hB"}})
	defer node.Close()
	local := readImage(node)
	t.Logf("read affinity at host hB: op_r deltas %v", local)
	ok := assert.GreaterOrEqual(t, local[1], int64(64), "every one of the 64 objects read from osd.1")
	ok = assert.Zero(t, local[0]+local[2], "no read from the OSDs of the other hosts") && ok
	if !ok {
		// What the OSDs served while the image was read, to tell its
		// reads from anybody else's.
		for i := range local {
			out, err := cl.Ceph(ctx, "tell", fmt.Sprintf("osd.%d", i), "dump_historic_ops")
			t.Logf("osd.%d dump_historic_ops since the reads began (err %v):\n%s", i, err, historicOps(out, readStart))
		}
	}

	plain := rbdstore.New(rbdstore.Options{})
	defer plain.Close()
	primaries := readImage(plain)
	t.Logf("without: op_r deltas %v", primaries)
	assert.Positive(t, primaries[0]+primaries[2], "without read affinity the primaries, on every host, serve")
}

// historicOps reduces `ceph tell osd.N dump_historic_ops` to a line per
// request that began at or after since: when, and what it was (client,
// object, operations).
func historicOps(out []byte, since time.Time) string {
	var d struct {
		Ops []struct {
			Description string `json:"description"`
			InitiatedAt string `json:"initiated_at"`
		} `json:"ops"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		return string(out)
	}
	var b strings.Builder
	for _, op := range d.Ops {
		at, err := time.Parse("2006-01-02T15:04:05.999999-0700", op.InitiatedAt)
		if err == nil && at.Before(since) {
			continue
		}
		fmt.Fprintf(&b, "  %s %s\n", op.InitiatedAt, op.Description)
	}
	return b.String()
}
