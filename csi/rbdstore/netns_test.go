package rbdstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/rbdstore"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
	"github.com/purerbd/purerbd/rados/radostest/netns"
)

// TestNetNamespace: a cluster reachable only inside a network namespace
// (the subnet is blackholed in the root one), configured as ceph-csi's
// config.json does with netNamespaceFilePath. The node's store reaches
// it from there; a store that ignores the setting (the controller's)
// does not; a path that is no namespace is an unavailable cluster.
func TestNetNamespace(t *testing.T) {
	ns := netns.New(t, netns.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, err := cephcluster.Start(ctx, cephcluster.Options{Netns: ns.Name, BindAddr: ns.HostIP})
	require.NoError(t, err)
	defer cl.Close()
	cfg, err := csi.ParseClusters([]byte(`[{"clusterID": "` + cl.FSID + `", "monitors": ["` + cl.MonAddrs[0] + `"],
		"rbd": {"netNamespaceFilePath": "` + filepath.Join("/run/netns", ns.Name) + `"}}]`))
	require.NoError(t, err)
	c := cfg[0]
	cred := csi.Credentials{ID: "admin", Key: cl.AdminKey}

	node := rbdstore.New(rbdstore.Options{NetNamespaces: true, ConnectTimeout: 30 * time.Second})
	defer node.Close()
	require.NoError(t, node.Reachable(ctx, c))
	s, err := node.Session(ctx, c, cred)
	require.NoError(t, err)
	require.NoError(t, s.Ping(ctx))

	other := rbdstore.New(rbdstore.Options{ConnectTimeout: 3 * time.Second})
	defer other.Close()
	assert.ErrorIs(t, other.Reachable(ctx, c), csi.ErrUnavailable, "reached from the root namespace: the test proves nothing")

	c.NetNamespace = filepath.Join(t.TempDir(), "no-such-namespace")
	err = node.Reachable(ctx, c)
	assert.ErrorIs(t, err, csi.ErrUnavailable)
	assert.ErrorContains(t, err, "netNamespaceFilePath")
	_, err = node.Session(ctx, c, cred)
	assert.ErrorIs(t, err, csi.ErrUnavailable)

	_, err = csi.ParseClusters([]byte(`[{"clusterID": "a", "monitors": ["x:1"], "rbd": {"netNamespaceFilePath": "relative/net"}}]`))
	assert.ErrorContains(t, err, "not an absolute path")
}
