package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/pmorjan/kmod"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/fakestore"
	"github.com/purerbd/purerbd/csi/sanitytest"
	"github.com/purerbd/purerbd/nbd"
)

// inGuest is set by the csi package's VM test, which runs this test
// binary inside the VM.
var inGuest = flag.Bool("guest", false, "run the in-VM node sanity suite (set by csi's TestNodeInVM)")

// TestNodeSanityGuest is the in-VM half of csi's TestNodeInVM: csi-sanity
// with the Node Service specs, against the node service on the real
// kernel (NBD devices, mkfs, mounts) and the controller on the fake
// image store, whose images the node serves from memory. Outside the VM
// (without -guest) there is nothing for it to do.
func TestNodeSanityGuest(t *testing.T) {
	if !*inGuest {
		return
	}
	ctx := context.Background()
	k, err := kmod.New(kmod.SetIgnoreStatus())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"crc32c_generic", "ext4"} {
		if err := k.Load(m, "", 0); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("/proc/mounts", "/etc/mtab")

	const cluster, user, key = "sanity-cluster", "csi", "AQBzYW5pdHlzYW5pdHlzYW5pdHlzYW5pdHk="
	store := fakestore.New()
	store.AddCluster(cluster, map[string]string{user: key})
	pool := store.AddPool(cluster, "rbd", 100<<30)
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.json")
	if err := os.WriteFile(conf, []byte(`[{"clusterID":"`+cluster+`","monitors":["192.0.2.1:3300"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	creds := func(string) (csi.Credentials, bool) { return csi.Credentials{ID: user, Key: key}, true }

	ctrlSock, nodeSock := filepath.Join(dir, "controller.sock"), filepath.Join(dir, "node.sock")
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	drv := csi.NewDriver(csi.Config{
		NodeID: "vm-node", Endpoint: ctrlSock, ClusterConfigPath: conf, Controller: true, Store: store,
		Credentials: creds, Logger: logger("controller"),
	})
	go drv.Run(dctx)

	n, err := csi.NewNodeServer(csi.NodeConfig{
		NodeID: "vm-node", ClusterConfigPath: conf, Opener: &memOpener{store: store, images: map[string]*nbd.Memory{}},
		Credentials: creds, StateDir: "/run/purerbd-csi-sanity", Conns: 2, Logger: logger("node"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("unix", nodeSock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csipb.RegisterIdentityServer(srv, nodeIdentity{})
	csipb.RegisterNodeServer(srv, n)
	go srv.Serve(lis)
	defer srv.Stop()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ctrlSock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the controller does not serve")
		}
	}

	sanitytest.Run(t, sanitytest.Options{
		ControllerSocket: ctrlSock,
		NodeSocket:       nodeSock,
		DriverName:       csi.DefaultDriverName,
		Parameters:       map[string]string{"clusterID": cluster, "pool": "rbd"},
		Secrets:          map[string]string{"userID": user, "userKey": key},
		ValidVolumeID: func() string {
			b := make([]byte, 8)
			rand.Read(b)
			return csi.VolumeID{ClusterID: cluster, Pool: pool, Image: "csi-vol-" + hex.EncodeToString(b)}.String()
		},
		VolumeSize: 32 << 20,
		Title:      "purerbd CSI sanity with the node service (VM)",
	})
}

// nodeIdentity answers the suite's Identity calls on the node socket (the
// driver serves the real Identity service on the controller socket) as
// a plugin serving both would: the suite reads the plugin capabilities
// there to learn that expansion starts at the controller.
type nodeIdentity struct {
	csipb.UnimplementedIdentityServer
}

func (nodeIdentity) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: csi.DefaultDriverName, VendorVersion: "vm-test"}, nil
}

func (nodeIdentity) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	return &csipb.GetPluginCapabilitiesResponse{Capabilities: []*csipb.PluginCapability{
		{Type: &csipb.PluginCapability_Service_{Service: &csipb.PluginCapability_Service{Type: csipb.PluginCapability_Service_CONTROLLER_SERVICE}}},
		{Type: &csipb.PluginCapability_VolumeExpansion_{VolumeExpansion: &csipb.PluginCapability_VolumeExpansion{Type: csipb.PluginCapability_VolumeExpansion_ONLINE}}},
	}}, nil
}

func (nodeIdentity) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// memOpener serves the fake store's images from memory: one nbd.Memory
// per image, kept across opens, sized (and resized) as the store says.
type memOpener struct {
	store  *fakestore.Store
	mu     sync.Mutex
	images map[string]*nbd.Memory
}

func (o *memOpener) OpenImage(ctx context.Context, c csi.Cluster, cred csi.Credentials, vol csi.VolumeID, opts csi.OpenImageOptions) (csi.NodeImage, error) {
	s, err := o.store.Session(ctx, c, cred)
	if err != nil {
		return nil, err
	}
	ref := csi.ImageRef{Pool: vol.Pool, Namespace: vol.Namespace, Name: vol.Image}
	info, err := s.StatImage(ctx, ref)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.images[vol.String()]
	if m == nil {
		if m, err = nbd.NewMemory(int64(info.Size)); err != nil {
			return nil, err
		}
		o.images[vol.String()] = m
	}
	return &memImage{Memory: m, session: s, ref: ref}, nil
}

type memImage struct {
	*nbd.Memory
	session csi.Session
	ref     csi.ImageRef
}

func (m *memImage) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	return m.Memory.ReadAt(ctx, p, off)
}

func (m *memImage) WriteAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	return m.Memory.WriteAt(ctx, p, off)
}

func (m *memImage) Discard(ctx context.Context, off, length int64) error {
	return m.Memory.Trim(ctx, off, length)
}

// Refresh takes the size the store has now (ControllerExpandVolume).
func (m *memImage) Refresh(ctx context.Context) error {
	info, err := m.session.StatImage(ctx, m.ref)
	if err != nil {
		return err
	}
	if int64(info.Size) != m.Size() {
		return m.Memory.Resize(ctx, int64(info.Size))
	}
	return nil
}

func (m *memImage) Close() error { return nil }
