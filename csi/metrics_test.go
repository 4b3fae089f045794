package csi

import (
	"context"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/purerbd/purerbd/csi/internal/fileimage"
	"github.com/purerbd/purerbd/internal/promscrape"
	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// failingBackend is an in-memory export whose writes from failAt on fail
// with EIO, so that errors are counted.
type failingBackend struct {
	*nbd.Memory
	failAt int64
}

func (b failingBackend) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off >= b.failAt {
		return 0, nbd.ErrIO
	}
	return b.Memory.WriteAt(ctx, p, off)
}

// lockedImage reports a fixed exclusive-lock state for the state
// collector (csi/rbdstore's test checks the real one against Ceph).
type lockedImage struct {
	fileImage
	st LockState
}

func (i lockedImage) LockState() (LockState, bool) { return i.st, true }

// TestMetricsOverHTTP serves a volume's NBD export with the volume's
// observer to qemu-io and node calls to a gRPC client, scrapes the
// registry over HTTP and checks that the figures move as the traffic
// did; the families exposed must be those deploy/README.md documents;
// forgetting the volume (unstage) removes its series.
func TestMetricsOverHTTP(t *testing.T) {
	qemuIO := nbdtest.RequireTool(t, "qemu-io", "qemu-utils")
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	n, _ := newTestNode(t, func(c *NodeConfig) { c.Metrics = m })
	web := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer web.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	scrape := func() promscrape.Families {
		f, err := promscrape.Scrape(ctx, web.URL)
		require.NoError(t, err)
		return f
	}

	// A staged volume as the node knows it, its device not served here.
	id := testVolumeID("img-metrics")
	rec := testRecord(id)
	img, err := fileimageOpen(t)
	require.NoError(t, err)
	n.mu.Lock()
	n.vols[id] = &nodeVolume{rec: rec, img: lockedImage{fileImage: img, st: LockState{Owner: true, Handovers: 2}}}
	n.mu.Unlock()

	// Its export, served with the volume's observer, as attachConfig
	// wires it for the kernel.
	mem, err := nbd.NewMemory(16 << 20)
	require.NoError(t, err)
	obs := m.volume(id)
	srv := nbdtest.Start(t, nbd.Config{
		Observer: obs.nbdObserver(),
		Exports:  []*nbd.Export{{Name: "disk", Backend: failingBackend{Memory: mem, failAt: 8 << 20}}},
	})
	vol := map[string]string{"volume_id": id}
	op := func(o string) map[string]string { return map[string]string{"volume_id": id, "op": o} }

	before := scrape()
	w0, ok := before.Value("purerbd_volume_written_bytes_total", vol)
	require.True(t, ok, "the volume's series exist from its attach")
	assert.Zero(t, w0)

	out, err := exec.CommandContext(ctx, qemuIO, "-f", "raw", srv.URI("disk"),
		"-c", "write -P 0xab 0 1M", "-c", "write -P 0xcd 1M 64k", "-c", "read -P 0xab 0 1M",
		"-c", "flush", "-c", "write -P 1 8M 4k").CombinedOutput()
	require.Error(t, err, "the write at 8 MiB must fail:\n%s", out)
	require.Contains(t, string(out), "Input/output error", "%s", out)

	after := scrape()
	val := func(name string, l map[string]string) float64 {
		v, ok := after.Value(name, l)
		require.True(t, ok, "no series %s%v", name, l)
		return v
	}
	assert.Equal(t, float64(1<<20+64<<10), val("purerbd_volume_written_bytes_total", vol), "bytes written")
	assert.GreaterOrEqual(t, val("purerbd_volume_read_bytes_total", vol), float64(1<<20), "bytes read")
	assert.Equal(t, 3.0, val("purerbd_volume_requests_total", op("write")), "writes, the failed one too")
	assert.Equal(t, 1.0, val("purerbd_volume_request_errors_total", op("write")), "failed writes")
	assert.Equal(t, 3.0, val("purerbd_volume_request_duration_seconds", op("write")), "write latencies observed")
	assert.GreaterOrEqual(t, val("purerbd_volume_requests_total", op("flush")), 1.0)
	assert.GreaterOrEqual(t, val("purerbd_volume_requests_total", op("read")), 1.0)
	assert.Zero(t, val("purerbd_volume_requests_in_flight", vol))
	assert.Equal(t, 1.0, val("purerbd_volume_io_held", vol), "no device serves the volume in this process")
	assert.Equal(t, 1.0, val("purerbd_volume_info", map[string]string{"volume_id": id, "device": "/dev/nbd3", "mode": "filesystem"}))
	assert.Equal(t, 1.0, val("purerbd_volume_lock_owner", vol))
	assert.Equal(t, 2.0, val("purerbd_volume_lock_handovers_total", vol))
	assert.Zero(t, val("purerbd_volume_reattaches_total", vol))

	// Device events, as the healer, the watchdog and a takeover report them.
	obs.connectionReplaced()
	obs.stalled()
	obs.reattached(reattachConnsLost)
	after = scrape()
	assert.Equal(t, 1.0, val("purerbd_volume_healed_connections_total", vol))
	assert.Equal(t, 1.0, val("purerbd_volume_stalls_total", vol))
	assert.Equal(t, 1.0, val("purerbd_volume_reattaches_total", map[string]string{"volume_id": id, "reason": reattachConnsLost}))

	// CSI calls through a gRPC server with the metrics' interceptor.
	sock := filepath.Join(t.TempDir(), "csi.sock")
	lis, err := net.Listen("unix", sock)
	require.NoError(t, err)
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(m.interceptors()...))
	csipb.RegisterNodeServer(gs, n)
	go gs.Serve(lis)
	defer gs.Stop()
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	nc := csipb.NewNodeClient(conn)
	for range 2 {
		_, err = nc.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
		require.NoError(t, err)
	}
	_, err = nc.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: id})
	require.Error(t, err, "no volume path")
	after = scrape()
	calls := func(method, code string) float64 {
		return val("purerbd_csi_calls_total", map[string]string{"method": "/csi.v1.Node/" + method, "code": code})
	}
	assert.Equal(t, 2.0, calls("NodeGetCapabilities", "OK"))
	assert.Equal(t, 1.0, calls("NodeGetVolumeStats", "InvalidArgument"))
	assert.Equal(t, 2.0, val("purerbd_csi_call_duration_seconds", map[string]string{"method": "/csi.v1.Node/NodeGetCapabilities"}))

	docs, err := promscrape.ReadDocs("../deploy/README.md")
	require.NoError(t, err)
	assert.Empty(t, promscrape.Check(after, docs, "purerbd_volume_", "purerbd_csi_"), "deploy/README.md against the registry")

	// Unstaged: no series of the volume is left.
	n.mu.Lock()
	delete(n.vols, id)
	n.mu.Unlock()
	m.forget(id)
	gone := scrape()
	for name, fam := range gone {
		for _, s := range fam.GetMetric() {
			for _, lp := range s.GetLabel() {
				assert.False(t, lp.GetName() == "volume_id" && lp.GetValue() == id, "%s still has a series of the unstaged volume", name)
			}
		}
	}
	v, ok := gone.Value("purerbd_csi_calls_total", map[string]string{"method": "/csi.v1.Node/NodeGetCapabilities", "code": "OK"})
	assert.True(t, ok && v == 2, "the call counts outlive the volume: %v %v", v, ok)
}

// fileimageOpen opens a small file image in the test's directory.
func fileimageOpen(t *testing.T) (fileImage, error) {
	p := filepath.Join(t.TempDir(), "img")
	f, err := os.Create(p)
	if err != nil {
		return fileImage{}, err
	}
	if err := f.Truncate(16 << 20); err != nil {
		f.Close()
		return fileImage{}, err
	}
	f.Close()
	img, err := fileimage.Open(p, false)
	if err == nil {
		t.Cleanup(func() { img.Close() })
	}
	return img, err
}
