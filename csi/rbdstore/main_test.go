package rbdstore_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/rados/radostest"
)

// cluster is the real Ceph cluster every test of the package shares.
var cluster *radostest.Cluster

func TestMain(m *testing.M) {
	os.Exit(radostest.Main(m, radostest.Options{}, &cluster))
}

func testCtx(t *testing.T) context.Context {
	radostest.SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// csiCluster is the cluster as the cluster config describes it.
func csiCluster() csi.Cluster {
	return csi.Cluster{ID: cluster.FSID, Monitors: cluster.MonAddrs}
}

func admin() csi.Credentials { return csi.Credentials{ID: "admin", Key: cluster.AdminKey} }

// rbdCLI runs Ceph's rbd tool on the cluster: the oracle.
func rbdCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := cluster.Rbd(testCtx(t), args...)
	require.NoError(t, err, "rbd %s: %s", strings.Join(args, " "), out)
	return string(out)
}
