package kubelet_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/kubelet"
)

func dial(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix:"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestRegistrarAsKubelet plays the kubelet's plugin watcher against a
// Registrar with the kubelet's own generated client: it finds the
// registration socket (which replaced a stale one), asks GetInfo, reaches
// the plugin at the endpoint it was told, reports a failed and then a
// successful registration, and sees the socket go when the plugin stops.
func TestRegistrarAsKubelet(t *testing.T) {
	sock := startController(t, csi.DefaultDriverName)
	regDir := filepath.Join(tempDir(t), "plugins_registry")
	require.NoError(t, os.Mkdir(regDir, 0o750))
	regSock := filepath.Join(regDir, csi.DefaultDriverName+"-reg.sock")

	// A socket left by an earlier process, nobody listening on it.
	l, err := net.Listen("unix", regSock)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	var logs logBuffer
	reg, err := kubelet.NewRegistrar(kubelet.RegistrarConfig{
		DriverName:      csi.DefaultDriverName,
		CSIEndpoint:     "unix://" + sock,
		KubeletEndpoint: sock, // the test's host is the kubelet's
		Dir:             regDir,
		Logger:          logs.logger(),
	})
	require.NoError(t, err)
	require.Equal(t, regSock, reg.SocketPath())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- reg.Serve(ctx) }()
	defer func() {
		if t.Failed() {
			t.Logf("registrar log:\n%s", logs.String())
		}
	}()

	kl := registerapi.NewRegistrationClient(dial(t, regSock))
	var info *registerapi.PluginInfo
	eventually(t, 20*time.Second, func() error {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		defer ccancel()
		info, err = kl.GetInfo(cctx, &registerapi.InfoRequest{})
		return err
	})
	// Nobody listened on the stale socket: GetInfo answered on a new one.
	assert.Contains(t, logs.String(), "removed a stale registration socket")
	assert.Equal(t, registerapi.CSIPlugin, info.GetType())
	assert.Equal(t, csi.DefaultDriverName, info.GetName())
	assert.Equal(t, sock, info.GetEndpoint())
	assert.Equal(t, []string{"1.0.0"}, info.GetSupportedVersions())

	// The kubelet's CSI handler next talks to the plugin at that endpoint.
	pi, err := csipb.NewIdentityClient(dial(t, info.GetEndpoint())).GetPluginInfo(ctx, &csipb.GetPluginInfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, info.GetName(), pi.GetName())

	_, err = kl.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "test: NodeGetInfo failed"})
	require.NoError(t, err)
	assert.Contains(t, logs.String(), "level=ERROR")
	assert.Contains(t, logs.String(), "test: NodeGetInfo failed")
	// Refused, it keeps serving for the kubelet's next try.
	_, err = kl.GetInfo(ctx, &registerapi.InfoRequest{})
	require.NoError(t, err, "GetInfo after a refused registration")
	_, err = kl.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true})
	require.NoError(t, err)
	assert.Contains(t, logs.String(), "registered with the kubelet")
	select {
	case err := <-done:
		t.Fatalf("Serve ended while the plugin runs: %v", err)
	default:
	}

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not end with its context")
	}
	_, err = os.Lstat(regSock)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "registration socket left behind: %v", err)
}

// TestRegistrarRefuses checks the deployment mistakes Serve reports
// instead of registering: a plugin of another name on the CSI socket and
// a registration path taken by something that is not a socket; and that
// with no plugin answering it registers nothing and ends with its context.
func TestRegistrarRefuses(t *testing.T) {
	newReg := func(endpoint, dir string) *kubelet.Registrar {
		var logs logBuffer
		r, err := kubelet.NewRegistrar(kubelet.RegistrarConfig{
			DriverName: csi.DefaultDriverName, CSIEndpoint: endpoint,
			KubeletEndpoint: "/var/lib/kubelet/plugins/x/csi.sock", Dir: dir, Logger: logs.logger(),
		})
		require.NoError(t, err)
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	other := startController(t, "other.example.com")
	err := newReg("unix://"+other, tempDir(t)).Serve(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"other.example.com"`)
	assert.Contains(t, err.Error(), `"`+csi.DefaultDriverName+`"`)

	sock := startController(t, csi.DefaultDriverName)
	dir := tempDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, csi.DefaultDriverName+"-reg.sock"), []byte("x"), 0o600))
	err = newReg("unix://"+sock, dir).Serve(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a socket")

	dir = tempDir(t)
	wctx, wcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer wcancel()
	require.NoError(t, newReg("unix://"+filepath.Join(dir, "none.sock"), dir).Serve(wctx))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, ents, "a registration socket for a plugin that never answered")

	_, err = kubelet.NewRegistrar(kubelet.RegistrarConfig{DriverName: "d", CSIEndpoint: "unix:///csi/csi.sock", KubeletEndpoint: "csi.sock"})
	assert.Error(t, err, "a relative path on the host")
	assert.True(t, strings.Contains(err.Error(), "not absolute"), err)
}
