package csi_test

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/sanitytest"
)

// TestSanityFakeStore runs csi-sanity's Identity and Controller specs
// against the driver on the in-memory fake image store. The same specs
// run against a real Ceph cluster in package csi/rbdstore.
func TestSanityFakeStore(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	sanitytest.Run(t, sanitytest.Options{
		ControllerSocket: h.sock,
		DriverName:       csi.DefaultDriverName,
		Parameters:       map[string]string{"clusterID": testCluster, "pool": "rbd"},
		Secrets:          secrets(),
		ValidVolumeID: func() string {
			return csi.VolumeID{ClusterID: testCluster, Pool: h.pool, Image: "csi-vol-" + randomHex(16)}.String()
		},
		Title: "purerbd CSI sanity (fake image store)",
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
