package rbdstore_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/rbdstore"
)

// rbdInfo is `rbd info --format json`.
type rbdInfo struct {
	Name     string   `json:"name"`
	ID       string   `json:"id"`
	Size     uint64   `json:"size"`
	Features []string `json:"features"`
	DataPool string   `json:"data_pool"`
	// The layout: log2 of the object size, and the striping.
	Order       int    `json:"order"`
	ObjectSize  uint64 `json:"object_size"`
	StripeUnit  uint64 `json:"stripe_unit"`
	StripeCount uint64 `json:"stripe_count"`
	Parent      *struct {
		Pool      string `json:"pool"`
		Namespace string `json:"pool_namespace"`
		Image     string `json:"image"`
		ID        string `json:"id"`
		Snapshot  string `json:"snapshot"`
	} `json:"parent"`
}

func info(t *testing.T, spec string) rbdInfo {
	t.Helper()
	var i rbdInfo
	require.NoError(t, json.Unmarshal([]byte(rbdCLI(t, "info", "--format", "json", spec)), &i))
	return i
}

// TestSessionAgainstRbd drives every Session operation on the real
// cluster and checks the result with Ceph's rbd tool (librbd).
func TestSessionAgainstRbd(t *testing.T) {
	ctx := testCtx(t)
	st := rbdstore.New(rbdstore.Options{})
	defer st.Close()
	s, err := st.Session(ctx, csiCluster(), admin())
	require.NoError(t, err)
	require.NoError(t, s.Ping(ctx))

	pool, err := s.LookupPool(ctx, cluster.Pool)
	require.NoError(t, err)
	name, err := s.PoolName(ctx, pool)
	require.NoError(t, err)
	assert.Equal(t, cluster.Pool, name)
	pools, err := s.RBDPools(ctx)
	require.NoError(t, err)
	assert.Contains(t, pools, pool, "rbd pool init sets the rbd application")
	_, err = s.LookupPool(ctx, "no-such-pool")
	assert.ErrorIs(t, err, csi.ErrNotFound)
	_, err = s.PoolAvailable(ctx, pool)
	assert.NoError(t, err)

	img := csi.ImageRef{Pool: pool, Name: "st-a"}
	require.NoError(t, s.CreateImage(ctx, img, 8<<20, csi.ImageOptions{Features: []string{"layering", "exclusive-lock"}}))
	assert.ErrorIs(t, s.CreateImage(ctx, img, 8<<20, csi.ImageOptions{}), csi.ErrExists)
	i := info(t, cluster.Pool+"/st-a")
	assert.EqualValues(t, 8<<20, i.Size)
	assert.ElementsMatch(t, []string{"layering", "exclusive-lock"}, i.Features)

	got, err := s.StatImage(ctx, img)
	require.NoError(t, err)
	assert.Equal(t, csi.ImageInfo{Name: "st-a", ID: i.ID, Size: 8 << 20}, got)
	byID, err := s.StatImage(ctx, csi.ImageRef{Pool: pool, ID: i.ID})
	require.NoError(t, err)
	assert.Equal(t, got, byID)
	_, err = s.StatImage(ctx, csi.ImageRef{Pool: pool, Name: "st-none"})
	assert.ErrorIs(t, err, csi.ErrNotFound)

	// Metadata, as `rbd image-meta` sees it.
	_, err = s.Metadata(ctx, img, "purerbd.csi.name")
	assert.ErrorIs(t, err, csi.ErrNotFound)
	require.NoError(t, s.SetMetadata(ctx, img, "purerbd.csi.name", "pvc-1"))
	assert.Equal(t, "pvc-1\n", rbdCLI(t, "image-meta", "get", cluster.Pool+"/st-a", "purerbd.csi.name"))
	v, err := s.Metadata(ctx, img, "purerbd.csi.name")
	require.NoError(t, err)
	assert.Equal(t, "pvc-1", v)

	// Snapshots and a clone.
	require.NoError(t, s.CreateSnapshot(ctx, img, "snap1"))
	assert.ErrorIs(t, s.CreateSnapshot(ctx, img, "snap1"), csi.ErrExists)
	snaps, err := s.ListSnapshots(ctx, img)
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	assert.Equal(t, "snap1", snaps[0].Name)
	assert.EqualValues(t, 8<<20, snaps[0].Size)
	assert.False(t, snaps[0].Created.IsZero())
	assert.Contains(t, rbdCLI(t, "snap", "ls", cluster.Pool+"/st-a"), "snap1")

	child := csi.ImageRef{Pool: pool, Name: "st-b"}
	require.NoError(t, s.CloneImage(ctx, img, "snap1", child, csi.ImageOptions{}))
	ci := info(t, cluster.Pool+"/st-b")
	require.NotNil(t, ci.Parent)
	assert.Equal(t, "st-a", ci.Parent.Image)
	assert.Equal(t, "snap1", ci.Parent.Snapshot)
	cs, err := s.StatImage(ctx, child)
	require.NoError(t, err)
	require.NotNil(t, cs.Parent)
	assert.Equal(t, csi.ParentInfo{Pool: pool, ImageID: i.ID, SnapID: snaps[0].ID}, *cs.Parent)

	// A snapshot that a clone needs goes to RBD's snapshot trash, as with
	// librbd (clone v2): gone from the list, still holding the image.
	require.NoError(t, s.RemoveSnapshot(ctx, img, "snap1"))
	snaps, err = s.ListSnapshots(ctx, img)
	require.NoError(t, err)
	assert.Empty(t, snaps)
	assert.Contains(t, rbdCLI(t, "snap", "ls", "--all", cluster.Pool+"/st-a"), "trash")
	assert.ErrorIs(t, s.RemoveImage(ctx, img), csi.ErrHasSnapshots)

	// Renames, as librbd sees them.
	require.NoError(t, s.CreateSnapshot(ctx, img, "snap2"))
	require.NoError(t, s.RenameSnapshot(ctx, img, "snap2", "snap2-deleted-4"))
	assert.Contains(t, rbdCLI(t, "snap", "ls", cluster.Pool+"/st-a"), "snap2-deleted-4")
	assert.ErrorIs(t, s.RenameSnapshot(ctx, img, "nope", "x"), csi.ErrNotFound)
	require.NoError(t, s.RenameImage(ctx, img, "st-a-deleted-x"))
	assert.Contains(t, rbdCLI(t, "ls", cluster.Pool), "st-a-deleted-x")
	names, err := s.ListImages(ctx, pool, "")
	require.NoError(t, err)
	assert.Contains(t, names, "st-a-deleted-x")
	assert.Contains(t, names, "st-b")
	old := csi.ImageRef{Pool: pool, Name: "st-a-deleted-x"}

	require.NoError(t, s.ResizeImage(ctx, child, 16<<20))
	assert.EqualValues(t, 16<<20, info(t, cluster.Pool+"/st-b").Size)

	// A watcher (a client with the image open) keeps it.
	// `rbd watch` keeps the image open until its stdin closes.
	watch := cluster.ToolCommand(ctx, "rbd", "--keyring", cluster.AdminKeyring, "watch", cluster.Pool+"/st-b")
	stdin, err := watch.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, watch.Start())
	watching := func() bool {
		out, err := cluster.Rbd(ctx, "status", cluster.Pool+"/st-b")
		return err == nil && strings.Contains(string(out), "watcher=")
	}
	require.Eventually(t, watching, 30*time.Second, 100*time.Millisecond)
	assert.ErrorIs(t, s.RemoveImage(ctx, child), csi.ErrBusy)
	stdin.Close()
	require.NoError(t, watch.Wait())
	require.False(t, watching())

	// The last clone takes the trashed snapshot with it.
	require.NoError(t, s.RemoveImage(ctx, child))
	assert.NotContains(t, rbdCLI(t, "snap", "ls", "--all", cluster.Pool+"/st-a-deleted-x"), "trash")
	require.NoError(t, s.RemoveSnapshot(ctx, old, "snap2-deleted-4"))
	require.NoError(t, s.RemoveImage(ctx, csi.ImageRef{Pool: pool, ID: i.ID}), "by ID")
	assert.ErrorIs(t, s.RemoveImage(ctx, child), csi.ErrNotFound)
	assert.NotContains(t, rbdCLI(t, "ls", cluster.Pool), "st-")

	// Reservations.
	_, err = s.Reservation(ctx, pool, "", "k")
	assert.ErrorIs(t, err, csi.ErrNotFound)
	require.NoError(t, s.SetReservation(ctx, pool, "", "k", "v"))
	v, err = s.Reservation(ctx, pool, "", "k")
	require.NoError(t, err)
	assert.Equal(t, "v", v)
	require.NoError(t, s.RemoveReservation(ctx, pool, "", "k"))
	require.NoError(t, s.RemoveReservation(ctx, pool, "", "k"))
	_, err = s.Reservation(ctx, pool, "", "k")
	assert.ErrorIs(t, err, csi.ErrNotFound)

	// Unsupported features are refused, not ignored.
	err = s.CreateImage(ctx, csi.ImageRef{Pool: pool, Name: "st-j"}, 1<<20, csi.ImageOptions{Features: []string{"layering", "journaling"}})
	assert.ErrorIs(t, err, csi.ErrUnsupported)
}

func TestNamespaces(t *testing.T) {
	ctx := testCtx(t)
	st := rbdstore.New(rbdstore.Options{})
	defer st.Close()
	s, err := st.Session(ctx, csiCluster(), admin())
	require.NoError(t, err)
	pool, err := s.LookupPool(ctx, cluster.Pool)
	require.NoError(t, err)

	img := csi.ImageRef{Pool: pool, Namespace: "st-tenant", Name: "ns-a"}
	err = s.CreateImage(ctx, img, 1<<20, csi.ImageOptions{})
	require.ErrorIs(t, err, csi.ErrNotFound, "the namespace does not exist yet")
	assert.Contains(t, err.Error(), "rbd namespace create")
	rbdCLI(t, "namespace", "create", "--pool", cluster.Pool, "--namespace", "st-tenant")
	require.NoError(t, s.CreateImage(ctx, img, 1<<20, csi.ImageOptions{}))
	assert.Contains(t, rbdCLI(t, "ls", "--pool", cluster.Pool, "--namespace", "st-tenant"), "ns-a")
	names, err := s.ListImages(ctx, pool, "st-tenant")
	require.NoError(t, err)
	assert.Equal(t, []string{"ns-a"}, names)
	names, err = s.ListImages(ctx, pool, "st-absent")
	require.NoError(t, err)
	assert.Empty(t, names)
	require.NoError(t, s.RemoveImage(ctx, img))
}

func TestAuthAndReachability(t *testing.T) {
	ctx := testCtx(t)
	st := rbdstore.New(rbdstore.Options{})
	defer st.Close()
	require.NoError(t, st.Reachable(ctx, csiCluster()))
	err := st.Reachable(ctx, csi.Cluster{ID: "x", Monitors: []string{"127.0.0.1:1"}})
	assert.ErrorIs(t, err, csi.ErrUnavailable)

	wrong := "AQBfTGpmAAAAABAAk4Q9xJ0t0mWmTqEXAMPLEQ=="
	_, err = st.Session(ctx, csiCluster(), csi.Credentials{ID: "admin", Key: wrong})
	require.Error(t, err)
	assert.True(t, errors.Is(err, csi.ErrUnauthenticated), "%v", err)
	assert.NotContains(t, err.Error(), wrong)
	assert.False(t, strings.Contains(err.Error(), cluster.AdminKey))

	// The cache hands out one connection per user and key.
	s1, err := st.Session(ctx, csiCluster(), admin())
	require.NoError(t, err)
	s2, err := st.Session(ctx, csiCluster(), admin())
	require.NoError(t, err)
	require.NoError(t, s1.Ping(ctx))
	require.NoError(t, s2.Ping(ctx))
}
