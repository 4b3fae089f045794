// Package radostest boots real, throwaway Ceph clusters for tests, in the
// spirit of net/http/httptest: one mon and one OSD by default, three and
// three (or any shape) on request, cephx on, msgr2 always, on 127.0.0.1.
//
// A test package shares one cluster through TestMain:
//
//	var cluster *radostest.Cluster
//
//	func TestMain(m *testing.M) {
//		os.Exit(radostest.Main(m, radostest.Options{}, &cluster))
//	}
//
// and a test that needs a cluster of its own (faults, other modes) calls
// New, which stops the cluster when the test ends.
//
// When the Ceph binaries are missing, Main and New fail with a message
// naming the packages to install: tests never skip silently.
//
// The one exception is the explicit daemon-free tier, go test -short:
// there Main boots nothing and leaves the cluster nil, New skips its test,
// and every test that uses Main's cluster calls SkipShort first (directly
// or through the package's connect helper) so it is skipped, not failed.
package radostest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/purerbd/purerbd/internal/shorttier"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
)

// Cluster is a running Ceph cluster; see cephcluster.Cluster for its
// fields (Conf, AdminKeyring, AdminKey, MonAddrs, FSID, Pool, Dir) and its
// methods (Ceph, Rados, Rbd, Kill, Stop, Start, Pause, Resume, WaitQuorum,
// WaitOSDsUp).
type Cluster = cephcluster.Cluster

// Options shape a cluster; the zero value is one mon, one memstore OSD and
// an "rbd" pool.
type Options = cephcluster.Options

// Connection modes and object stores, re-exported for convenience.
const (
	ModeDefault    = cephcluster.ModeDefault
	ModeCRC        = cephcluster.ModeCRC
	ModeSecure     = cephcluster.ModeSecure
	StoreMemstore  = cephcluster.StoreMemstore
	StoreBluestore = cephcluster.StoreBluestore
	// ReleaseReef runs Ceph 18.2 from a Debian trixie root (built into
	// the cache on first use) instead of the host's packages.
	ReleaseReef = cephcluster.ReleaseReef
	// ReleaseTentacle runs Ceph 20.2 from a Debian sid root (built into
	// the cache on first use) instead of the host's packages.
	ReleaseTentacle = cephcluster.ReleaseTentacle
)

// New boots a cluster for one test and stops it when the test ends. Logs
// are printed and the directory kept when the test failed.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	SkipShort(t)
	c, err := cephcluster.Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("radostest: %v", err)
	}
	t.Logf("radostest: cluster up in %v at %s (mons %v)", c.Started.Round(1e6), c.Dir, c.MonAddrs)
	t.Cleanup(func() {
		if t.Failed() {
			c.Options.KeepDir = true
			t.Logf("radostest: cluster kept at %s; log tails:%s", c.Dir, c.LogTails(30))
		}
		if err := c.Close(); err != nil {
			t.Errorf("radostest: stopping cluster: %v", err)
		}
	})
	return c
}

// SkipShort skips t under go test -short, the tier that runs without Ceph
// daemons; in a normal run it does nothing, and a test that then finds no
// Ceph fails. Tests that use Main's shared cluster call it before they
// touch the cluster.
func SkipShort(t testing.TB) {
	t.Helper()
	shorttier.Skip(t, "a Ceph cluster")
}

// Main boots a cluster, stores it in *cluster, runs the package's tests
// and stops the cluster. It returns the exit code for os.Exit. Under
// go test -short it boots nothing and leaves *cluster nil (see SkipShort).
func Main(m *testing.M, opts Options, cluster **Cluster) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		return m.Run()
	}
	c, err := cephcluster.Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "radostest: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "radostest: cluster up in %v at %s (mons %v)\n", c.Started.Round(1e6), c.Dir, c.MonAddrs)
	*cluster = c
	code := m.Run()
	if code != 0 {
		c.Options.KeepDir = true
		fmt.Fprintf(os.Stderr, "radostest: tests failed; cluster kept at %s; log tails:%s\n", c.Dir, c.LogTails(30))
	}
	if err := c.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "radostest: stopping cluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
