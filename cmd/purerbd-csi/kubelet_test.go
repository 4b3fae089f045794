package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/fakestore"
	"github.com/purerbd/purerbd/csi/kubelet"
	"github.com/purerbd/purerbd/internal/syncbuf"
)

func TestKubeletFlags(t *testing.T) {
	_, o, err := parseFlags([]string{"--node", "--nodeid=n1",
		"--kubelet-registration-path=/var/lib/kubelet/plugins/rbd.purerbd.io/csi.sock",
		"--plugin-registration-dir=/reg", "--health-addr=:9809"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, kubeletOptions{registrationPath: "/var/lib/kubelet/plugins/rbd.purerbd.io/csi.sock",
		registrationDir: "/reg", healthAddr: ":9809"}, o.kubelet)

	_, o, err = parseFlags([]string{"--node", "--nodeid=n1"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, kubeletOptions{registrationDir: kubelet.DefaultRegistrationDir}, o.kubelet, "registration and health are off unless asked for")

	_, _, err = parseFlags([]string{"--controller", "--kubelet-registration-path=/x/csi.sock"}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "--node")

	_, _, err = parseFlags([]string{"--controller", "--enable-profiling"}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "--metrics-address")
}

// TestRunProfiling runs the controller with its metrics and health
// endpoints on one address: the metrics and /healthz answer there with
// or without --enable-profiling, and Go's heap profile answers only with
// it.
func TestRunProfiling(t *testing.T) {
	dir, cfgPath := unreachableCluster(t)
	get := func(url string) (int, []byte) {
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, body
	}
	for _, profiling := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		var logs syncbuf.Buffer
		code := make(chan int, 1)
		args := []string{"--controller", "--endpoint=" + filepath.Join(dir, "csi.sock"), "--cluster-config=" + cfgPath,
			"--health-addr=127.0.0.1:0", "--metrics-address=127.0.0.1:0", "--log-format=json"}
		if profiling {
			args = append(args, "--enable-profiling")
		}
		go func() { code <- run(ctx, args, io.Discard, &logs) }()
		addr := awaitLogValue(t, &logs, "serving the metrics endpoint", "addr")
		st, body := get("http://" + addr + MetricsPath)
		assert.Equal(t, http.StatusOK, st)
		assert.Contains(t, string(body), "go_memstats_heap_inuse_bytes")
		st, _ = get("http://" + addr + kubelet.HealthPath)
		assert.Equal(t, http.StatusOK, st)
		st, body = get("http://" + addr + ProfilingPath + "heap")
		if profiling {
			assert.Equal(t, http.StatusOK, st)
			assert.True(t, bytes.HasPrefix(body, []byte{0x1f, 0x8b}), "the heap profile is gzipped protobuf: % x", body[:min(len(body), 8)])
		} else {
			assert.Equal(t, http.StatusNotFound, st, "profiles without --enable-profiling")
		}
		cancel()
		awaitExit(t, code, &logs)
	}
}

// unreachableCluster writes a cluster config naming cluster "c" with a
// monitor address that refuses connections, and returns its directory
// and path.
func unreachableCluster(t *testing.T) (dir, cfgPath string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mon := l.Addr().String()
	l.Close()
	dir = t.TempDir()
	cfgPath = filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`[{"clusterID": "c", "monitors": ["`+mon+`"]}]`), 0o600))
	return dir, cfgPath
}

// awaitLogValue waits up to 20 s for logValue to find key.
func awaitLogValue(t *testing.T, logs *syncbuf.Buffer, msg, key string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if v := logValue(logs.String(), msg, key); v != "" {
			return v
		}
		require.True(t, time.Now().Before(deadline), "no %q with %s after 20 s; log:\n%s", msg, key, logs.String())
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitExit waits up to 20 s for run's exit code and checks it is 0.
func awaitExit(t *testing.T, code <-chan int, logs *syncbuf.Buffer) {
	t.Helper()
	select {
	case c := <-code:
		assert.Equal(t, 0, c, "log:\n%s", logs.String())
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop")
	}
}

// logValue returns the value of key in the first JSON log record with
// message msg, or "".
func logValue(logs, msg, key string) string {
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == msg {
			s, _ := rec[key].(string)
			return s
		}
	}
	return ""
}

// TestRunHealthEndpoint runs the controller as its Deployment does, with
// --health-addr, against a cluster whose monitor refuses connections: the
// health endpoint answers 200 (a restart would not bring the cluster
// back) and names the cluster as degraded, the log says once that it is
// unreachable, and the plugin stops cleanly.
func TestRunHealthEndpoint(t *testing.T) {
	dir, cfgPath := unreachableCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncbuf.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"--controller", "--endpoint=" + filepath.Join(dir, "csi.sock"),
			"--cluster-config=" + cfgPath, "--health-addr=127.0.0.1:0", "--log-format=json"}, io.Discard, &logs)
	}()
	addr := awaitLogValue(t, &logs, "serving the health endpoint", "addr")
	deadline := time.Now().Add(20 * time.Second)
	var body []byte
	for {
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Get("http://" + addr + kubelet.HealthPath)
		require.NoError(t, err)
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		if strings.Contains(string(body), `degraded: cluster "c" unreachable since `) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the health endpoint never named the cluster: %s", body)
		time.Sleep(50 * time.Millisecond)
	}
	assert.True(t, strings.HasPrefix(string(body), "ok\n"), "%s", body)
	assert.Equal(t, 1, strings.Count(logs.String(), `"msg":"cluster unreachable","clusterID":"c"`), "log:\n%s", logs.String())
	cancel()
	awaitExit(t, code, &logs)
}

// TestServeWithKubeletRegistration: with a registration path, the kubelet
// finds the plugin's registration socket while the driver serves, and
// the socket goes when the plugin stops; a registration that cannot begin
// stops the driver and is the error.
func TestServeWithKubeletRegistration(t *testing.T) {
	dir, err := os.MkdirTemp("", "swk")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfgPath := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`[{"clusterID": "c", "monitors": ["192.0.2.1:3300"]}]`), 0o600))
	st := fakestore.New()
	st.AddCluster("c", nil)
	sock := filepath.Join(dir, "csi.sock")
	cfg := csi.Config{DriverName: csi.DefaultDriverName, Endpoint: "unix://" + sock, ClusterConfigPath: cfgPath,
		Controller: true, Store: st, Logger: slog.New(slog.DiscardHandler)}
	regDir := filepath.Join(dir, "registry")
	k := kubeletOptions{registrationPath: sock, registrationDir: regDir}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serveWithKubelet(ctx, cfg, k, csi.NewDriver(cfg).Run) }()
	regSock := filepath.Join(regDir, csi.DefaultDriverName+"-reg.sock")
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
	assert.Equal(t, sock, info.GetEndpoint())
	cancel()
	require.NoError(t, <-done)
	assert.NoFileExists(t, regSock)
	assert.NoFileExists(t, sock)

	// A registration path taken by a file: the plugin does not stay up
	// unregistered.
	require.NoError(t, os.WriteFile(regSock, nil, 0o600))
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = serveWithKubelet(ctx, cfg, k, csi.NewDriver(cfg).Run)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a socket")
	assert.NoError(t, ctx.Err(), "it ran until the test's deadline")
}
