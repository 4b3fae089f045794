package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
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

	cfg, _, err = parseFlags([]string{"--controller"}, &stderr)
	require.NoError(t, err)
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

func TestRunVersionAndErrors(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, 0, run(context.Background(), []string{"--version"}, &out, &errb))
	assert.Regexp(t, `^purerbd-csi \S+\n$`, out.String())
	assert.Equal(t, 2, run(context.Background(), nil, &out, &errb))
	assert.Contains(t, errb.String(), "--controller, --node or both")
	assert.Equal(t, 0, run(context.Background(), []string{"-h"}, &out, &errb))
}
