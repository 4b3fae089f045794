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

// lockInfo is `rados lock info --format json`.
type lockInfo struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Lockers []struct {
		Name       string `json:"name"`
		Cookie     string `json:"cookie"`
		Desc       string `json:"description"`
		Expiration string `json:"expiration"`
	} `json:"lockers"`
}

// TestOperationLocks: two stores (two controller replicas, each its own
// client) contend for one operation's lock in the pool; Ceph's rados
// tool shows it held, with the key as description, and renewed while
// held; a release hands it over.
func TestOperationLocks(t *testing.T) {
	ctx := testCtx(t)
	a := rbdstore.New(rbdstore.Options{})
	defer a.Close()
	b := rbdstore.New(rbdstore.Options{})
	defer b.Close()
	sa, err := a.Session(ctx, csiCluster(), admin())
	require.NoError(t, err)
	sb, err := b.Session(ctx, csiCluster(), admin())
	require.NoError(t, err)
	pool, err := sa.LookupPool(ctx, cluster.Pool)
	require.NoError(t, err)
	const key = "image test/1//csi-vol-oplock"

	release, err := sa.LockOperation(ctx, pool, "", key)
	require.NoError(t, err)
	_, err = sb.LockOperation(ctx, pool, "", key)
	assert.True(t, errors.Is(err, csi.ErrBusy), "the other replica took a held lock: %v", err)
	other, err := sb.LockOperation(ctx, pool, "", key+"-other")
	require.NoError(t, err, "another key is another lock")
	other()

	// the lock objects in the pool (purerbd_csi_op.<hash>), as rados ls
	// lists them
	lockObjects := func() []string {
		out, err := cluster.Rados(ctx, "-p", cluster.Pool, "ls")
		require.NoError(t, err, "%s", out)
		var objs []string
		for _, o := range strings.Fields(string(out)) {
			if strings.HasPrefix(o, "purerbd_csi_op.") {
				objs = append(objs, o)
			}
		}
		return objs
	}
	held := lockObjects()
	require.Len(t, held, 1, "one lock object while one key is locked")
	info := func() lockInfo {
		out, err := cluster.Rados(ctx, "-p", cluster.Pool, "lock", "info", held[0], "purerbd-csi-op", "--format", "json")
		require.NoError(t, err, "%s", out)
		var li lockInfo
		require.NoError(t, json.Unmarshal(out, &li), "%s", out)
		return li
	}
	first := info()
	assert.Equal(t, "exclusive-ephemeral", first.Type)
	require.Len(t, first.Lockers, 1)
	assert.Equal(t, key, first.Lockers[0].Desc)
	// held past a renewal: the expiration moves on
	time.Sleep(12 * time.Second)
	renewed := info()
	require.Len(t, renewed.Lockers, 1)
	assert.Greater(t, renewed.Lockers[0].Expiration, first.Lockers[0].Expiration, "renewed while held")
	assert.Equal(t, first.Lockers[0].Cookie, renewed.Lockers[0].Cookie)

	release()
	assert.Empty(t, lockObjects(), "the lock object goes with the lock")
	rb, err := sb.LockOperation(ctx, pool, "", key)
	require.NoError(t, err, "released: the other replica takes it")
	rb()
	assert.Empty(t, lockObjects())
}
