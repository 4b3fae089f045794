package main

import (
	"testing"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/sanitytest"
)

// TestSanityGuest runs all of csi-sanity (Identity, Controller and Node
// Service specs) against the purerbd-csi binary serving both roles on
// one socket in the VM, on the real cluster: every volume the suite
// makes is an RBD image, staged through the guest kernel's NBD driver,
// formatted and mounted. csi's TestNodeRBDInVM checks afterwards that
// the suite left no image behind.
func TestSanityGuest(t *testing.T) {
	g := needGuest(t)
	if g == nil {
		return
	}
	p := startBinary(t, "sanity", "--controller", "--node", "--nodeid", "vm-node", "--state-dir", "/run/purerbd-sanity")
	sanitytest.Run(t, sanitytest.Options{
		ControllerSocket: p.sock,
		NodeSocket:       p.sock,
		DriverName:       csi.DefaultDriverName,
		Parameters:       g.params(),
		Secrets:          g.secrets,
		ValidVolumeID:    g.newVolumeID,
		VolumeSize:       32 << 20,
		Title:            "purerbd-csi (controller + node) on RBD in the VM",
	})
}
