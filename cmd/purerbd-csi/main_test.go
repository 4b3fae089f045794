package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
)

func TestParseFlags(t *testing.T) {
	var stderr bytes.Buffer
	cfg, o, err := parseFlags([]string{
		"--controller", "--node", "--endpoint=unix:///tmp/x.sock", "--nodeid=n1", "--drivername=rbd.example.com",
		"--cluster-config=/c.json", "--log-level=debug", "--log-format=json", "--sweep-interval=1m",
		"--state-dir=/run/x", "--host-root=/host", "--tools-dir=/t", "--max-volumes=7", "--nbd-connections=2",
		"--nbd-io-timeout=6s", "--nbd-reattach-timeout=2m",
	}, &stderr)
	require.NoError(t, err)
	assert.True(t, cfg.Controller)
	assert.True(t, cfg.Node)
	assert.Equal(t, "unix:///tmp/x.sock", cfg.Endpoint)
	assert.Equal(t, "n1", cfg.NodeID)
	assert.Equal(t, "rbd.example.com", cfg.DriverName)
	assert.Equal(t, "/c.json", cfg.ClusterConfigPath)
	assert.Equal(t, time.Minute, cfg.SweepInterval)
	assert.Equal(t, slog.LevelDebug, o.logLevel)
	assert.Equal(t, "json", o.logFormat)
	assert.Nil(t, cfg.Credentials)
	assert.NotEmpty(t, cfg.Version)
	assert.Equal(t, nodeOptions{stateDir: "/run/x", hostRoot: "/host", toolsDir: "/t", maxVolumes: 7, conns: 2, ioTimeout: 6 * time.Second, reattach: 2 * time.Minute}, o.node)

	cfg, o, err = parseFlags([]string{"--controller"}, &stderr)
	require.NoError(t, err)
	assert.Equal(t, csi.DefaultStateDir, o.node.stateDir)
	assert.Equal(t, csi.DefaultNodeConns, o.node.conns)
	assert.Equal(t, csi.DefaultIOTimeout, o.node.ioTimeout)
	assert.Equal(t, csi.DefaultReattachTimeout, o.node.reattach)
	assert.Equal(t, csi.DefaultDriverName, cfg.DriverName)
	assert.Equal(t, "unix:///csi/csi.sock", cfg.Endpoint)
	assert.Equal(t, "/etc/ceph-csi-config/config.json", cfg.ClusterConfigPath)
	assert.Equal(t, 10*time.Minute, cfg.SweepInterval)

	for _, bad := range [][]string{
		{},                                 // no role
		{"--node"},                         // node without node ID
		{"--controller", "--log-level=x"},  // bad level
		{"--controller", "--log-format=x"}, // bad format
		{"--controller", "extra"},          // stray argument
		{"--controller", "--sweep-interval=-1s"},
		{"--bogus"},
	} {
		_, _, err := parseFlags(bad, &stderr)
		assert.Error(t, err, "%q", bad)
	}
}

func TestSecretsDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600))
	}
	write("userID", "all")
	write("userKey", "KEYALL")
	write("c2.userID", "two")
	write("c2.userKey", "KEY2")
	cfg, _, err := parseFlags([]string{"--controller", "--secrets-dir=" + dir}, &bytes.Buffer{})
	require.NoError(t, err)
	c, ok := cfg.Credentials("c1")
	require.True(t, ok)
	assert.Equal(t, csi.Credentials{ID: "all", Key: "KEYALL"}, c)
	c, _ = cfg.Credentials("c2")
	assert.Equal(t, csi.Credentials{ID: "two", Key: "KEY2"}, c)
	_, ok = csi.CredentialsFromDir(t.TempDir())("c1")
	assert.False(t, ok)
}

// TestRunNodeRole starts the node role as the DaemonSet does. Off a VM
// the host may have no nbd.ko: then the node service's start fails there,
// after the flags, the store and the node server were all set up; with
// nbd it serves until stopped.
func TestRunNodeRole(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`[{"clusterID": "c", "monitors": ["127.0.0.1:1"]}]`), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"--node", "--nodeid=n1", "--endpoint=" + filepath.Join(dir, "csi.sock"),
		"--cluster-config=" + cfgPath, "--state-dir=" + filepath.Join(dir, "state")}, &out, &errb)
	if code != 0 {
		assert.Equal(t, 1, code)
		assert.Contains(t, errb.String(), "nbd", "the node service starts by loading nbd.ko")
		t.Logf("node role stopped at the module: %s", strings.TrimSpace(errb.String()))
	} else {
		assert.Contains(t, errb.String(), "serving CSI")
	}
}

func TestRunVersionAndErrors(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, 0, run(context.Background(), []string{"--version"}, &out, &errb))
	assert.Regexp(t, `^purerbd-csi \S+\n$`, out.String())
	assert.Equal(t, 2, run(context.Background(), nil, &out, &errb))
	assert.Contains(t, errb.String(), "--controller, --node or both")
	assert.Equal(t, 0, run(context.Background(), []string{"-h"}, &out, &errb))
}
