package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/fakestore"
)

// cephCSIDriverName is the name ceph-csi's RBD PersistentVolumes carry
// in spec.csi.driver, which cannot be changed.
const cephCSIDriverName = "rbd.csi.ceph.com"

// TestCephCSIDriverName runs the plugin under ceph-csi's driver name as
// deploy/MIGRATING.md has it: the flags carry it (and ceph-csi's
// --instanceid), the kubelet finds the registration socket where
// ceph-csi's node-driver-registrar put it, <name>-reg.sock, with the
// plugin's socket in ceph-csi's plugin directory, and GetPluginInfo
// answers the name.
func TestCephCSIDriverName(t *testing.T) {
	cfg, _, err := parseFlags([]string{"--controller", "--drivername=" + cephCSIDriverName, "--instanceid=rook-ceph"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, cephCSIDriverName, cfg.DriverName)
	assert.Equal(t, "rook-ceph", cfg.CephCSIInstanceID)
	cfg, _, err = parseFlags([]string{"--controller"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, csi.DefaultCephCSIInstanceID, cfg.CephCSIInstanceID)

	dir, err := os.MkdirTemp("", "cdn")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfgPath := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`[{"clusterID": "c", "monitors": ["192.0.2.1:3300"]}]`), 0o600))
	st := fakestore.New()
	st.AddCluster("c", nil)
	// The kubelet's layout, as ceph-csi's DaemonSet mounts it.
	pluginDir := filepath.Join(dir, "plugins", cephCSIDriverName)
	require.NoError(t, os.MkdirAll(pluginDir, 0o750))
	sock := filepath.Join(pluginDir, "csi.sock")
	regDir := filepath.Join(dir, "plugins_registry")
	cfg = csi.Config{DriverName: cephCSIDriverName, Endpoint: "unix://" + sock, ClusterConfigPath: cfgPath,
		Controller: true, Store: st, Logger: slog.New(slog.DiscardHandler)}
	k := kubeletOptions{registrationPath: sock, registrationDir: regDir}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serveWithKubelet(ctx, cfg, k, csi.NewDriver(cfg).Run) }()
	regSock := filepath.Join(regDir, "rbd.csi.ceph.com-reg.sock")
	conn, err := grpc.NewClient("unix:"+regSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	var info *registerapi.PluginInfo
	deadline := time.Now().Add(20 * time.Second)
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		info, err = registerapi.NewRegistrationClient(conn).GetInfo(cctx, &registerapi.InfoRequest{})
		ccancel()
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "GetInfo: %v", err)
		time.Sleep(50 * time.Millisecond)
	}
	assert.Equal(t, cephCSIDriverName, info.GetName())
	assert.Equal(t, registerapi.CSIPlugin, info.GetType())
	assert.Equal(t, sock, info.GetEndpoint())

	pc, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer pc.Close()
	pi, err := csipb.NewIdentityClient(pc).GetPluginInfo(ctx, &csipb.GetPluginInfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, cephCSIDriverName, pi.GetName())
	cancel()
	require.NoError(t, <-done)
	assert.NoFileExists(t, regSock)
}
