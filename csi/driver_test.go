package csi_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/fakestore"
)

func TestDriverConfigChecks(t *testing.T) {
	ctx := context.Background()
	base := csi.Config{Endpoint: filepath.Join(t.TempDir(), "s.sock"), ClusterConfigPath: "/nonexistent"}
	for name, mod := range map[string]func(*csi.Config){
		"no role":             func(c *csi.Config) {},
		"controller no store": func(c *csi.Config) { c.Controller = true },
		"node no server":      func(c *csi.Config) { c.Node = true },
		"bad driver name":     func(c *csi.Config) { c.Controller, c.Store, c.DriverName = true, fakestore.New(), "-bad" },
		"no cluster config":   func(c *csi.Config) { c.Controller, c.Store, c.ClusterConfigPath = true, fakestore.New(), "" },
		"tcp endpoint":        func(c *csi.Config) { c.Controller, c.Store, c.Endpoint = true, fakestore.New(), "tcp://1.2.3.4:5" },
	} {
		cfg := base
		mod(&cfg)
		assert.Error(t, csi.NewDriver(cfg).Run(ctx), name)
	}
}

// TestRunStopsOnCancel: Run serves on the socket (removing a stale one)
// until its context ends, then removes it.
func TestRunStopsOnCancel(t *testing.T) {
	dir, err := os.MkdirTemp("", "csi")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "csi.sock")
	h := newHarness(t, harnessOpts{}) // for a store and a config
	cfgPath := filepath.Join(h.dir, "config.json")
	// A stale socket from an earlier run.
	stale, err := net.Listen("unix", sock)
	require.NoError(t, err)
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	require.FileExists(t, sock)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- csi.NewDriver(csi.Config{Endpoint: "unix://" + sock, ClusterConfigPath: cfgPath, Controller: true, Store: h.store}).Run(ctx)
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(sock); return err == nil }, 5*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	_, err = os.Stat(sock)
	assert.True(t, os.IsNotExist(err))
}

// TestPanicInCallIsInternal: a call that panics gets INTERNAL, the
// plugin keeps serving, and the log has the panic and its stack but not
// the request's key.
func TestPanicInCallIsInternal(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	dir, err := os.MkdirTemp("", "csi")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "csi.sock")
	logs := &syncBuffer{}
	drv := csi.NewDriver(csi.Config{
		ClusterConfigPath: filepath.Join(h.dir, "config.json"), Controller: true, Store: h.store,
		Logger:    slog.New(slog.NewTextHandler(logs, nil)),
		FaultHook: func(step string) error { panic("step " + step + " with key " + testKey) },
	})
	lis, err := net.Listen("unix", sock)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- drv.Serve(ctx, lis) }()
	defer func() { cancel(); <-done }()
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctrl := csipb.NewControllerClient(conn)

	_, err = ctrl.CreateVolume(ctx, h.volReq("pvc-panic", 1<<20))
	assert.Equal(t, codes.Internal, status.Code(err), "%v", err)
	assert.NotContains(t, err.Error(), testKey)
	// Still serving.
	_, err = csipb.NewIdentityClient(conn).Probe(ctx, &csipb.ProbeRequest{})
	require.NoError(t, err)
	l := logs.String()
	assert.Contains(t, l, "a CSI call panicked")
	assert.Contains(t, l, "runtime/debug.Stack")
	assert.Contains(t, l, "CreateVolume")
	assert.NotContains(t, l, testKey)
}
