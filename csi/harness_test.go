package csi_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/fakestore"
)

const (
	testCluster = "test-cluster"
	testUser    = "csi"
	// A well-formed cephx key; the fake only compares it.
	testKey = "AQBfTGpmAAAAABAAk4Q9xJ0t0mWmTqEXAMPLEQ=="
)

// harness runs a Driver over a unix socket on the fake image store and
// holds gRPC clients for it.
type harness struct {
	t      *testing.T
	store  *fakestore.Store
	pool   int64
	dir    string
	sock   string
	logs   *syncBuffer
	ctrl   csipb.ControllerClient
	meta   csipb.SnapshotMetadataClient
	group  csipb.GroupControllerClient
	ident  csipb.IdentityClient
	faults *faults
	drv    *csi.Driver
}

// faults is a FaultHook that fails named steps a given number of times.
type faults struct {
	mu    sync.Mutex
	fail  map[string]int
	block map[string]chan chan struct{}
	seen  []string
}

func (f *faults) hook(step string) error {
	f.mu.Lock()
	f.seen = append(f.seen, step)
	if b := f.block[step]; b != nil {
		delete(f.block, step)
		f.mu.Unlock()
		release := make(chan struct{})
		b <- release
		<-release
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	if f.fail[step] > 0 {
		f.fail[step]--
		return fmt.Errorf("injected failure before %s", step)
	}
	return nil
}

func (f *faults) failOnce(step string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[step]++
}

// blockAt makes the next call that reaches step wait there; the returned
// channel yields, once the step is reached, a channel to close to let it go.
func (f *faults) blockAt(step string) <-chan chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.block == nil {
		f.block = map[string]chan chan struct{}{}
	}
	c := make(chan chan struct{}, 1)
	f.block[step] = c
	return c
}

func (f *faults) steps() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.seen
	f.seen = nil
	return out
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type harnessOpts struct {
	noPluginCreds bool
	configJSON    string
	// trash makes the fake remove snapshots that clones need as librbd
	// does with clone v2 (snapshot trash) instead of refusing.
	trash bool
	// replicaOf makes the driver another replica of that harness's
	// controller: a driver of its own on the same store.
	replicaOf *harness
	// kmsConfig is the KMS configuration's JSON (encrypted classes with
	// an encryptionKMSID); kmsSecrets the Kubernetes Secrets it names.
	kmsConfig  string
	kmsSecrets csi.SecretReader
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, store: fakestore.New(), logs: &syncBuffer{}, faults: &faults{fail: map[string]int{}}}
	if r := o.replicaOf; r != nil {
		h.store, h.pool = r.store, r.pool
	} else {
		h.store.TrashSnapshots = o.trash
		h.store.AddCluster(testCluster, map[string]string{testUser: testKey})
		h.pool = h.store.AddPool(testCluster, "rbd", 100<<30)
		h.store.AddPool(testCluster, "ec-data", 100<<30)
	}
	// Unix socket paths are limited to 108 bytes: keep them short.
	dir, err := os.MkdirTemp("", "csi")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	h.dir = dir
	h.sock = filepath.Join(dir, "csi.sock")
	cfgPath := filepath.Join(dir, "config.json")
	js := o.configJSON
	if js == "" {
		js = `[{"clusterID": "` + testCluster + `", "monitors": ["127.0.0.1:3300"], "cephFS": {"subvolumeGroup": "x"}}]`
	}
	require.NoError(t, os.WriteFile(cfgPath, []byte(js), 0o600))

	cfg := csi.Config{
		Version:           "test",
		NodeID:            "node-1",
		ClusterConfigPath: cfgPath,
		Controller:        true,
		Store:             h.store,
		Logger:            slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		FaultHook:         h.faults.hook,
		KMSConfigPath:     filepath.Join(dir, "kms.json"),
		Secrets:           o.kmsSecrets,
	}
	if o.kmsConfig != "" {
		require.NoError(t, os.WriteFile(cfg.KMSConfigPath, []byte(o.kmsConfig), 0o600))
	}
	if !o.noPluginCreds {
		cfg.Credentials = func(string) (csi.Credentials, bool) { return csi.Credentials{ID: testUser, Key: testKey}, true }
	}
	drv := csi.NewDriver(cfg)
	h.drv = drv
	lis, err := net.Listen("unix", h.sock)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- drv.Serve(ctx, lis) }()
	conn, err := grpc.NewClient("unix:"+h.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if t.Failed() {
			t.Logf("driver logs:\n%s", h.logs.String())
		}
	})
	h.ctrl = csipb.NewControllerClient(conn)
	h.meta = csipb.NewSnapshotMetadataClient(conn)
	h.group = csipb.NewGroupControllerClient(conn)
	h.ident = csipb.NewIdentityClient(conn)
	return h
}

func secrets() map[string]string { return map[string]string{"userID": testUser, "userKey": testKey} }

func mountCap(mode csipb.VolumeCapability_AccessMode_Mode) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "ext4"}},
	}
}

func blockCap(mode csipb.VolumeCapability_AccessMode_Mode) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
	}
}

func (h *harness) volReq(name string, size int64) *csipb.CreateVolumeRequest {
	return &csipb.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csipb.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csipb.VolumeCapability{mountCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
		Parameters:         map[string]string{"clusterID": testCluster, "pool": "rbd"},
		Secrets:            secrets(),
	}
}

func (h *harness) createVolume(name string, size int64) *csipb.Volume {
	h.t.Helper()
	r, err := h.ctrl.CreateVolume(context.Background(), h.volReq(name, size))
	require.NoError(h.t, err)
	return r.GetVolume()
}

func (h *harness) createSnapshot(name, volID string) *csipb.Snapshot {
	h.t.Helper()
	r, err := h.ctrl.CreateSnapshot(context.Background(), &csipb.CreateSnapshotRequest{Name: name, SourceVolumeId: volID, Secrets: secrets()})
	require.NoError(h.t, err)
	return r.GetSnapshot()
}

func (h *harness) deleteVolume(id string) error {
	_, err := h.ctrl.DeleteVolume(context.Background(), &csipb.DeleteVolumeRequest{VolumeId: id, Secrets: secrets()})
	return err
}

func (h *harness) deleteSnapshot(id string) error {
	_, err := h.ctrl.DeleteSnapshot(context.Background(), &csipb.DeleteSnapshotRequest{SnapshotId: id, Secrets: secrets()})
	return err
}

// imageNames lists the fake cluster's images and their snapshots.
func (h *harness) imageNames() []string {
	var out []string
	for _, im := range h.store.Images(testCluster) {
		s := im.Name
		for _, sn := range im.Snaps {
			s += "@" + sn
		}
		out = append(out, s)
	}
	return out
}
