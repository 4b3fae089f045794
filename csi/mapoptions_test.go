package csi

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi/internal/fileimage"
	"github.com/purerbd/purerbd/csi/internal/nodestate"
)

func TestParseMapOptions(t *testing.T) {
	for _, c := range []struct {
		in   string
		want nbdOptions
	}{
		{"", nbdOptions{}},
		// ceph-csi's example: the krbd section is krbd's, not ours.
		{"krbd:lock_on_read,queue_depth=1024;nbd:try-netlink", nbdOptions{}},
		// A section without a mounter is krbd's (ceph-csi's rule), as in
		// Rook's commented example.
		{"lock_on_read,queue_depth=1024", nbdOptions{}},
		{"nbd:io-timeout=60,reattach-timeout=600", nbdOptions{IOTimeout: time.Minute, ReattachTimeout: 10 * time.Minute}},
		{" NBD : --io-timeout=7 , exclusive ", nbdOptions{IOTimeout: 7 * time.Second}},
		{"nbd:timeout=9", nbdOptions{IOTimeout: 9 * time.Second}},
		// A later section of a mounter replaces an earlier one.
		{"nbd:io-timeout=5;nbd:reattach-timeout=30", nbdOptions{ReattachTimeout: 30 * time.Second}},
		{"krbd:read_from_replica=localize,crush_location=zone:z1;nbd:nbds_max=64,max_part=0,show-cookie", nbdOptions{}},
	} {
		got, err := parseMapOptions(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
	for in, msg := range map[string]string{
		"nbd:notrim":                 "mount without discard",
		"nbd:read-only":              "access mode decides",
		"nbd:encryption-format=luks": "does not encrypt",
		"nbd:log-file=/x":            `"log-file" is not known to purerbd`,
		"nbd:io-timeout=0":           "the node's own default",
		"nbd:reattach-timeout=0":     "fail every I/O",
		"nbd:io-timeout":             "needs a value in seconds",
		"nbd:io-timeout=1.5":         "not a whole number",
		"nbd:io-timeout=86401":       "more than a day",
		"fuse:x":                     `unknown mounter "fuse"`,
		"read_from_replica=localize,crush_location=zone:z1": "unknown mounter",
	} {
		_, err := parseMapOptions(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), msg, in)
		assert.Contains(t, err.Error(), "mapOptions", in)
	}
	assert.NoError(t, checkUnmapOptions("krbd:force;nbd:force"))
	assert.ErrorContains(t, checkUnmapOptions("fuse:force"), "unmapOptions")
}

// TestNBDTimeouts: a volume's own timeouts replace the node's; the floor
// of an adaptive timeout stays under the ceiling, a fixed one stays
// fixed; a volume without its own keeps the node's; without a node
// timeout (the default) requests are resent, except on a device with
// several connections (attached by an earlier plugin), which keeps the
// kernel's default timeout.
func TestNBDTimeouts(t *testing.T) {
	fixed := &NodeServer{cfg: NodeConfig{IOTimeout: 30 * time.Second, MinIOTimeout: 30 * time.Second, ReattachTimeout: 5 * time.Minute}}
	adaptive := &NodeServer{cfg: NodeConfig{IOTimeout: 30 * time.Second, MinIOTimeout: time.Second, ReattachTimeout: 5 * time.Minute}}
	none := &NodeServer{cfg: NodeConfig{ResendInterval: time.Second, ReattachTimeout: 5 * time.Minute}}
	for _, c := range []struct {
		n                     *NodeServer
		conns, ioS, reattachS int
		want                  nbdTimeouts
	}{
		{fixed, 4, 0, 0, nbdTimeouts{timeout: 30 * time.Second, min: 30 * time.Second, reattach: 5 * time.Minute}},
		{fixed, 4, 60, 0, nbdTimeouts{timeout: time.Minute, min: time.Minute, reattach: 5 * time.Minute}},
		{fixed, 4, 10, 900, nbdTimeouts{timeout: 10 * time.Second, min: 10 * time.Second, reattach: 15 * time.Minute}},
		{adaptive, 4, 60, 0, nbdTimeouts{timeout: time.Minute, min: time.Second, reattach: 5 * time.Minute}},
		{adaptive, 4, 0, 20, nbdTimeouts{timeout: 30 * time.Second, min: time.Second, reattach: 20 * time.Second}},
		{none, 1, 0, 0, nbdTimeouts{resend: time.Second, reattach: 5 * time.Minute}},
		{none, 1, 45, 0, nbdTimeouts{timeout: 45 * time.Second, min: 45 * time.Second, reattach: 5 * time.Minute}},
		{none, 4, 0, 0, nbdTimeouts{timeout: 30 * time.Second, min: 30 * time.Second, reattach: 5 * time.Minute}},
	} {
		rec := &nodestate.Record{Conns: c.conns, IOTimeout: c.ioS, ReattachTimeout: c.reattachS}
		assert.Equal(t, c.want, c.n.nbdTimeouts(rec), "%+v", c)
	}
	// And attachConfig hands them to the kernel.
	p := filepath.Join(t.TempDir(), "img")
	require.NoError(t, os.WriteFile(p, make([]byte, 1<<20), 0o600))
	img, err := fileimage.Open(p, false)
	require.NoError(t, err)
	defer img.Close()
	fixed.log = slog.New(slog.DiscardHandler)
	cfg, err := fixed.attachConfig(img, &nodestate.Record{VolumeID: "v", Conns: 1, IOTimeout: 45, ReattachTimeout: 120})
	require.NoError(t, err)
	assert.Equal(t, 45*time.Second, cfg.Timeout)
	assert.Equal(t, 45*time.Second, cfg.MinTimeout)
	assert.Equal(t, 2*time.Minute, cfg.DeadConnTimeout)
	none.log = fixed.log
	cfg, err = none.attachConfig(img, &nodestate.Record{VolumeID: "v", Conns: 1})
	require.NoError(t, err)
	assert.Equal(t, time.Second, cfg.ResendInterval)
	assert.Zero(t, cfg.Timeout)
	assert.Zero(t, cfg.MinTimeout)
}

// TestDevicesShareBuffers: every volume's device, NBD or ublk, borrows
// its request buffers from the node's one pool, so that volumes written
// one after another reuse them.
func TestDevicesShareBuffers(t *testing.T) {
	n := &NodeServer{log: slog.New(slog.DiscardHandler)}
	p := filepath.Join(t.TempDir(), "img")
	require.NoError(t, os.WriteFile(p, make([]byte, 1<<20), 0o600))
	img, err := fileimage.Open(p, false)
	require.NoError(t, err)
	defer img.Close()
	var pools []any
	for _, id := range []string{"v1", "v2"} {
		rec := &nodestate.Record{VolumeID: id, Conns: 1}
		cfg, err := n.attachConfig(img, rec)
		require.NoError(t, err)
		pools = append(pools, cfg.Server.Buffers, n.ublkConfig(img, rec).Buffers)
	}
	for _, b := range pools {
		assert.Same(t, &n.buffers, b)
	}
}
