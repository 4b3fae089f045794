package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/internal/promscrape"
	"github.com/purerbd/purerbd/rados/radostest"
)

// TestControllerBinary runs the purerbd-csi binary as the controller
// Deployment does (cluster config file, plugin secrets directory, unix
// socket) against a real Ceph cluster: Probe is ready and the health
// endpoint answers 200, a volume is made and deleted, the metrics
// endpoint (on the health endpoint's address) counts those calls by
// code and shows the Ceph session, SIGTERM stops it cleanly and removes
// the socket.
func TestControllerBinary(t *testing.T) {
	cl := radostest.New(t, radostest.Options{})
	dir, err := os.MkdirTemp("", "csibin")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "purerbd-csi")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	cfg := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`[{"clusterID": "c1", "monitors": [%q]}]`, strings.Join(cl.MonAddrs, `","`))), 0o600))
	secrets := filepath.Join(dir, "secrets")
	require.NoError(t, os.Mkdir(secrets, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(secrets, "userID"), []byte("admin"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(secrets, "userKey"), []byte(cl.AdminKey), 0o600))
	sock := filepath.Join(dir, "csi.sock")

	// A free port for the health endpoint, as the Deployment gives one.
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	healthAddr := hl.Addr().String()
	hl.Close()

	var logs bytes.Buffer
	cmd := exec.Command(bin, "--controller", "--endpoint=unix://"+sock, "--cluster-config="+cfg,
		"--secrets-dir="+secrets, "--health-addr="+healthAddr, "--metrics-address="+healthAddr, "--log-level=debug", "--log-format=json")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("purerbd-csi output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "no socket after 20 s")
		time.Sleep(50 * time.Millisecond)
	}

	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, err := csipb.NewIdentityClient(conn).Probe(ctx, &csipb.ProbeRequest{})
	require.NoError(t, err)
	assert.True(t, pr.GetReady().GetValue(), "Probe with the plugin's credentials")
	// The liveness probe's view of the same: the health endpoint.
	var hresp *http.Response
	hdeadline := time.Now().Add(10 * time.Second)
	for {
		hresp, err = (&http.Client{Timeout: 20 * time.Second}).Get("http://" + healthAddr + "/healthz")
		if err == nil || time.Now().After(hdeadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err, "GET /healthz")
	hbody, _ := io.ReadAll(hresp.Body)
	hresp.Body.Close()
	assert.Equal(t, http.StatusOK, hresp.StatusCode, "%s", hbody)
	assert.Equal(t, "ok\n", string(hbody))

	ctrl := csipb.NewControllerClient(conn)
	req := &csipb.CreateVolumeRequest{
		Name:          "binary-test",
		CapacityRange: &csipb.CapacityRange{RequiredBytes: 8 << 20},
		VolumeCapabilities: []*csipb.VolumeCapability{{
			AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
		}},
		Parameters: map[string]string{"pool": cl.Pool}, // one cluster: clusterID may be left out
	}
	_, err = ctrl.CreateVolume(ctx, req)
	require.Equal(t, codes.InvalidArgument, status.Code(err), "CreateVolume without secrets must not borrow the plugin's credentials: %v", err)
	classSecrets := map[string]string{"userID": "admin", "userKey": cl.AdminKey}
	req.Secrets = classSecrets
	v, err := ctrl.CreateVolume(ctx, req)
	require.NoError(t, err, "CreateVolume with the class's secret")
	ls, err := cl.Rbd(ctx, "ls", cl.Pool)
	require.NoError(t, err)
	assert.Contains(t, string(ls), v.GetVolume().GetVolumeContext()["imageName"])
	_, err = ctrl.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: v.GetVolume().GetVolumeId(), Secrets: classSecrets})
	require.NoError(t, err)
	ls, err = cl.Rbd(ctx, "ls", cl.Pool)
	require.NoError(t, err)
	assert.Empty(t, strings.TrimSpace(string(ls)))
	checkControllerMetrics(ctx, t, "http://"+healthAddr+MetricsPath)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		assert.NoError(t, err, "exit status after SIGTERM")
	case <-time.After(20 * time.Second):
		t.Fatal("purerbd-csi did not stop within 20 s of SIGTERM")
	}
	_, err = os.Stat(sock)
	assert.True(t, os.IsNotExist(err), "socket left behind")
	assert.NotContains(t, logs.String(), cl.AdminKey)
	assert.Contains(t, logs.String(), `"msg":"serving CSI"`)
}

// checkControllerMetrics scrapes the metrics of TestControllerBinary's
// plugin: one CreateVolume refused for want of secrets and one made,
// one DeleteVolume, a live session to cluster c1 that sent OSD
// requests; and the families deploy/README.md documents for the
// controller (the node's volume metrics are checked by csi's
// TestMetricsOverHTTP).
func checkControllerMetrics(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	fams, err := promscrape.Scrape(ctx, url)
	require.NoError(t, err)
	val := func(name string, l map[string]string) float64 {
		v, ok := fams.Value(name, l)
		require.True(t, ok, "no series %s%v", name, l)
		return v
	}
	calls := func(method, code string) float64 {
		return val("purerbd_csi_calls_total", map[string]string{"method": "/csi.v1.Controller/" + method, "code": code})
	}
	assert.Equal(t, 1.0, calls("CreateVolume", "InvalidArgument"))
	assert.Equal(t, 1.0, calls("CreateVolume", "OK"))
	assert.Equal(t, 1.0, calls("DeleteVolume", "OK"))
	assert.Equal(t, 2.0, val("purerbd_csi_call_duration_seconds", map[string]string{"method": "/csi.v1.Controller/CreateVolume"}))
	sess := map[string]string{"cluster_id": "c1", "user": "client.admin"}
	assert.Equal(t, 1.0, val("purerbd_ceph_mon_session_up", sess))
	assert.Greater(t, val("purerbd_ceph_osd_requests_total", sess), 0.0)
	assert.Greater(t, val("purerbd_ceph_osd_sessions", sess), 0.0)
	msgs, writes := val("purerbd_ceph_osd_messages_written_total", sess), val("purerbd_ceph_osd_writes_total", sess)
	assert.Greater(t, writes, 0.0)
	assert.LessOrEqual(t, writes, msgs, "a write carries at least one message")
	assert.Greater(t, val("purerbd_ceph_osd_written_bytes_total", sess), msgs*73, "a message frame's preamble and header alone are 73 bytes")
	assert.Zero(t, val("purerbd_ceph_open_images", sess), "the controller keeps no image open")
	assert.Equal(t, 1.0, val("purerbd_cluster_reachable", map[string]string{"cluster_id": "c1"}))
	assert.NotEmpty(t, fams.Names("go_"), "the Go runtime's metrics")
	docs, err := promscrape.ReadDocs("../../deploy/README.md")
	require.NoError(t, err)
	assert.Empty(t, promscrape.Check(fams, docs, "purerbd_csi_", "purerbd_ceph_", "purerbd_cluster_"), "deploy/README.md against the registry")
}
