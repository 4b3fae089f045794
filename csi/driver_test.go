package csi_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
