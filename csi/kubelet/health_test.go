package kubelet_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/kubelet"
	"github.com/purerbd/purerbd/csi/rbdstore"
	"github.com/purerbd/purerbd/nbd/kernel"
)

// serveHealth serves a HealthHandler for the CSI socket sock on a
// loopback port until the test ends, and returns its /healthz URL.
func serveHealth(t *testing.T, sock string, timeout time.Duration) string {
	t.Helper()
	var logs logBuffer
	h, err := kubelet.NewHealthHandler(kubelet.HealthConfig{CSIEndpoint: "unix://" + sock, Timeout: timeout, Logger: logs.logger()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- kubelet.ServeHealth(ctx, "127.0.0.1:0", h, func(a net.Addr) { addr <- a }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeHealth: %v", err)
		}
		h.Close()
	})
	select {
	case a := <-addr:
		return "http://" + a.String() + kubelet.HealthPath
	case err := <-done:
		t.Fatalf("ServeHealth: %v", err)
	}
	return ""
}

// get is the kubelet's liveness probe: GET, status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestHealthHealthy: a controller whose cluster answers is healthy.
func TestHealthHealthy(t *testing.T) {
	url := serveHealth(t, startController(t, csi.DefaultDriverName), 0)
	code, body := get(t, url)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "ok\n", body)

	code, _ = get(t, strings.TrimSuffix(url, kubelet.HealthPath)+"/other")
	assert.Equal(t, http.StatusNotFound, code)
}

// TestHealthUnreachableCluster: a controller on the real RADOS store
// whose cluster's monitor refuses connections is healthy (restarting it
// would not bring the cluster back) and names the cluster in a
// "degraded:" line once the background check has found it down.
func TestHealthUnreachableCluster(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mon := l.Addr().String()
	l.Close() // nothing listens there now
	dir := tempDir(t)
	st := rbdstore.New(rbdstore.Options{ConnectTimeout: 2 * time.Second})
	defer st.Close()
	sock := startDriver(t, csi.Config{Controller: true, Store: st, ClusterConfigPath: clusterConfig(t, dir, mon)})
	url := serveHealth(t, sock, 0)
	eventually(t, 20*time.Second, func() error {
		code, body := get(t, url)
		if code != http.StatusOK || !strings.HasPrefix(body, "ok\n") {
			return fmt.Errorf("health answered %d: %s", code, body)
		}
		if !strings.Contains(body, `degraded: cluster "c1" unreachable since `) {
			return fmt.Errorf("the cluster is not named yet: %s", body)
		}
		return nil
	})
}

// TestHealthSilentCluster: a monitor that accepts but never speaks
// holds the cluster check up, never the health check: it answers 200 in
// time.
func TestHealthSilentCluster(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	st := rbdstore.New(rbdstore.Options{})
	defer st.Close()
	sock := startDriver(t, csi.Config{Controller: true, Store: st, ClusterConfigPath: clusterConfig(t, tempDir(t), l.Addr().String())})
	url := serveHealth(t, sock, time.Second)
	start := time.Now()
	code, body := get(t, url)
	assert.Equal(t, http.StatusOK, code, body)
	assert.True(t, strings.HasPrefix(body, "ok\n"), body)
	assert.Less(t, time.Since(start), time.Second, "the health check waited for the cluster")
}

// TestHealthNoPlugin: nothing on the CSI socket is a failed check.
func TestHealthNoPlugin(t *testing.T) {
	code, body := get(t, serveHealth(t, filepath.Join(tempDir(t), "csi.sock"), time.Second))
	assert.Equal(t, http.StatusInternalServerError, code, body)
	assert.Contains(t, body, "CSI Probe failed")
}

// TestHealthDegradedNode: a node plugin that attaches through ioctls is
// ready but says so. The host has no nbd module, so a fake sysfs says nbd
// is loaded (the VM tests run the real thing): the nbd netlink family
// then does not resolve, and the node's start finds it attaches through
// ioctls, which the health endpoint names under "degraded:" with 200.
func TestHealthDegradedNode(t *testing.T) {
	dir := tempDir(t)
	sys := filepath.Join(dir, "sys")
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "module", "nbd"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "block"), 0o755))
	conf := clusterConfig(t, dir, "192.0.2.1:3300")
	st := rbdstore.New(rbdstore.Options{})
	defer st.Close()
	var nlogs logBuffer
	n, err := csi.NewNodeServer(csi.NodeConfig{
		NodeID: "node-1", ClusterConfigPath: conf, Opener: st,
		StateDir: filepath.Join(dir, "state"), Logger: nlogs.logger(),
		Module: kernel.ModuleConfig{SysfsRoot: sys},
	})
	require.NoError(t, err)
	sock := startDriver(t, csi.Config{Node: true, NodeID: "node-1", NodeServer: n, ClusterConfigPath: conf, Logger: nlogs.logger()})
	code, body := get(t, serveHealth(t, sock, 0))
	assert.Equal(t, http.StatusOK, code, body)
	lines := strings.Split(strings.TrimSpace(body), "\n")
	require.GreaterOrEqual(t, len(lines), 2, body)
	assert.Equal(t, "ok", lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "degraded: "), body)
	assert.Contains(t, body, "no nbd netlink family")
	assert.Contains(t, body, "attached through ioctls")
	assert.Contains(t, nlogs.String(), "node degraded", "the node's start does not log it")
}
