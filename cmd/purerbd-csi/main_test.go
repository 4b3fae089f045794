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
		"--device-type=ublk", "--nbd-io-timeout=6s", "--nbd-reattach-timeout=2m", "--ceph-conf=/etc/x.conf", "--ms-mode=secure",
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
	assert.Equal(t, nodeOptions{stateDir: "/run/x", hostRoot: "/host", toolsDir: "/t", maxVolumes: 7, conns: 2, deviceType: "ublk", ioTimeout: 6 * time.Second, ioMin: csi.DefaultMinIOTimeout, resend: csi.DefaultResendInterval, reattach: 2 * time.Minute}, o.node)
	assert.Equal(t, cephOptions{conf: "/etc/x.conf", confGiven: true, msMode: "secure"}, o.ceph)

	cfg, o, err = parseFlags([]string{"--controller"}, &stderr)
	require.NoError(t, err)
	assert.Equal(t, csi.DefaultStateDir, o.node.stateDir)
	assert.Equal(t, csi.DefaultNodeConns, o.node.conns)
	assert.Equal(t, csi.DeviceAuto, o.node.deviceType)
	assert.Equal(t, csi.DefaultIOTimeout, o.node.ioTimeout)
	assert.Equal(t, csi.DefaultReattachTimeout, o.node.reattach)
	assert.Equal(t, csi.DefaultDriverName, cfg.DriverName)
	assert.Equal(t, "unix:///csi/csi.sock", cfg.Endpoint)
	assert.Equal(t, "/etc/ceph-csi-config/config.json", cfg.ClusterConfigPath)
	assert.Equal(t, 10*time.Minute, cfg.SweepInterval)
	assert.Equal(t, cephOptions{conf: "/etc/ceph/ceph.conf"}, o.ceph)

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

// TestCephConf maps --ceph-conf and --ms-mode onto the store's
// connection modes.
func TestCephConf(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "ceph.conf")
	require.NoError(t, os.WriteFile(conf, []byte("[global]\n\tauth_client_required = cephx\n\tms_client_mode = secure\n"+
		"[client]\n\tms_mon_client_mode = secure\n[client.ops]\n\tms_client_mode = prefer-secure\n"), 0o644))
	missing := filepath.Join(dir, "none.conf")

	opts, err := storeOptions(cephOptions{conf: conf})
	require.NoError(t, err)
	mon, osd := opts.Modes("csi")
	assert.Equal(t, [2]string{"secure", "secure"}, [2]string{mon, osd})
	_, osd = opts.Modes("ops")
	assert.Equal(t, "prefer-secure", osd, "a user's own section wins")

	opts, err = storeOptions(cephOptions{conf: conf, msMode: "crc"})
	require.NoError(t, err)
	mon, osd = opts.Modes("ops")
	assert.Equal(t, [2]string{"crc", "crc"}, [2]string{mon, osd}, "--ms-mode overrides ceph.conf")

	opts, err = storeOptions(cephOptions{conf: missing})
	require.NoError(t, err, "the default ceph.conf is optional, as the ConfigMap is")
	assert.Nil(t, opts.Conf)
	mon, osd = opts.Modes("csi")
	assert.Equal(t, [2]string{"", ""}, [2]string{mon, osd}, "Ceph's defaults")

	_, err = storeOptions(cephOptions{conf: missing, confGiven: true})
	assert.ErrorContains(t, err, "--ceph-conf", "a ceph.conf named on the command line must exist")
	_, err = storeOptions(cephOptions{msMode: "tls"})
	assert.ErrorContains(t, err, "--ms-mode")
	bad := filepath.Join(dir, "bad.conf")
	require.NoError(t, os.WriteFile(bad, []byte("[client]\nms_client_mode = plain\n"), 0o644))
	_, err = storeOptions(cephOptions{conf: bad})
	assert.ErrorContains(t, err, "ms_client_mode")

	var out, errb bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), []string{"--controller", "--ms-mode=tls"}, &out, &errb))
	assert.Contains(t, errb.String(), "--ms-mode")
}
