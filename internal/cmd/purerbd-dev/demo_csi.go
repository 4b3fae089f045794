package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/rbdstore"
	"github.com/purerbd/purerbd/internal/buildinfo"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
)

// demoCSI is purerbd-csi's controller, in this process, serving the CSI
// gRPC API on a unix socket in the demo's directory.
type demoCSI struct {
	sock   string
	store  *rbdstore.Store
	cancel context.CancelFunc
	served chan error
	conn   *grpc.ClientConn
	ctrl   csipb.ControllerClient
	ident  csipb.IdentityClient
}

// startDemoCSI starts the controller over the cluster c (cluster config
// file and socket in c.Dir; no credentials of its own: every call
// carries them as CSI secrets).
func startDemoCSI(c *cephcluster.Cluster, stderr io.Writer) (_ *demoCSI, err error) {
	cfgPath := filepath.Join(c.Dir, "csi-config.json")
	js, err := json.Marshal([]map[string]any{{"clusterID": c.FSID, "monitors": c.MonAddrs}})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfgPath, js, 0o600); err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d := &demoCSI{sock: filepath.Join(c.Dir, "csi.sock"), store: rbdstore.New(rbdstore.Options{Logger: log})}
	drv := csi.NewDriver(csi.Config{
		Version:           buildinfo.Version(),
		ClusterConfigPath: cfgPath,
		Controller:        true,
		Store:             d.store,
		Logger:            log,
	})
	lis, err := net.Listen("unix", d.sock)
	if err != nil {
		d.store.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.served = cancel, make(chan error, 1)
	go func() { d.served <- drv.Serve(ctx, lis) }()
	if d.conn, err = grpc.NewClient("unix:"+d.sock, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		d.close(io.Discard)
		return nil, err
	}
	d.ctrl, d.ident = csipb.NewControllerClient(d.conn), csipb.NewIdentityClient(d.conn)
	return d, nil
}

// close stops the controller and closes its connections.
func (d *demoCSI) close(stderr io.Writer) {
	if d.conn != nil {
		d.conn.Close()
	}
	d.cancel()
	if err := <-d.served; err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "purerbd demo: CSI controller: %v\n", err)
	}
	d.store.Close()
}

// csiWalk is one walk through the controller's calls, printing each.
type csiWalk struct {
	d       *demoCSI
	c       *cephcluster.Cluster
	out     io.Writer
	secrets map[string]string
	params  map[string]string
}

// runDemoCSI walks the controller through create, snapshot, volume from
// snapshot, volume from volume, expand and delete, over its socket,
// showing what librbd's rbd tool sees after each step.
func runDemoCSI(ctx context.Context, c *cephcluster.Cluster, d *demoCSI, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	w := &csiWalk{d: d, c: c, out: stdout,
		secrets: map[string]string{"userID": "admin", "userKey": c.AdminKey},
		params:  map[string]string{"clusterID": c.FSID, "pool": c.Pool},
	}
	fmt.Fprintf(stdout, `purerbd demo: CSI walk-through: purerbd-csi's controller (in this process) serves
  unix://%s
with the cluster config %s; every call carries the
credentials as CSI secrets userID and userKey (the key is never printed).

`, d.sock, filepath.Join(c.Dir, "csi-config.json"))

	info, err := d.ident.GetPluginInfo(ctx, &csipb.GetPluginInfoRequest{})
	if err != nil {
		return w.fail("GetPluginInfo", err)
	}
	probe, err := d.ident.Probe(ctx, &csipb.ProbeRequest{})
	if err != nil || !probe.GetReady().GetValue() {
		return w.fail("Probe", fmt.Errorf("not ready (%v)", err))
	}
	w.ok("identity", fmt.Sprintf("GetPluginInfo: %s %s; Probe: ready", info.GetName(), info.GetVendorVersion()))

	vol, err := w.create(ctx, "create volume", "demo-vol", 64<<20, nil)
	if err != nil {
		return err
	}
	snapName := "demo-snap"
	fmt.Fprintf(stdout, "CSI CreateSnapshot name=%s source=%s secrets=[userID userKey]\n", snapName, vol.GetVolumeId())
	sr, err := d.ctrl.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{Name: snapName, SourceVolumeId: vol.GetVolumeId(), Secrets: w.secrets})
	if err != nil {
		return w.fail("create snapshot", err)
	}
	snap := sr.GetSnapshot()
	w.ok("create snapshot", fmt.Sprintf("snapshot ID %s (%d bytes, ready %v)", snap.GetSnapshotId(), snap.GetSizeBytes(), snap.GetReadyToUse()))
	vid, _ := csi.ParseVolumeID(vol.GetVolumeId())
	if err := w.rbd(ctx, "snap", "ls", c.Pool+"/"+vid.Image); err != nil {
		return err
	}

	restored, err := w.create(ctx, "volume from snapshot", "demo-restored", 64<<20, &csipb.VolumeContentSource{
		Type: &csipb.VolumeContentSource_Snapshot{Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshotId()}}})
	if err != nil {
		return err
	}
	clone, err := w.create(ctx, "volume from volume", "demo-clone", 64<<20, &csipb.VolumeContentSource{
		Type: &csipb.VolumeContentSource_Volume{Volume: &csipb.VolumeContentSource_VolumeSource{VolumeId: vol.GetVolumeId()}}})
	if err != nil {
		return err
	}

	fmt.Fprintf(stdout, "CSI ControllerExpandVolume volume=%s required=128 MiB secrets=[userID userKey]\n", vol.GetVolumeId())
	er, err := d.ctrl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{VolumeId: vol.GetVolumeId(),
		CapacityRange: &csipb.CapacityRange{RequiredBytes: 128 << 20}, Secrets: w.secrets})
	if err != nil {
		return w.fail("expand", err)
	}
	w.ok("expand", fmt.Sprintf("capacity %d MiB, node expansion required %v", er.GetCapacityBytes()>>20, er.GetNodeExpansionRequired()))
	if err := w.rbd(ctx, "info", c.Pool+"/"+vid.Image); err != nil {
		return err
	}

	// Delete in the order Kubernetes would let go of them; the origin
	// goes last, so nothing is left behind as a tombstone.
	for _, v := range []*csipb.Volume{restored, clone} {
		fmt.Fprintf(stdout, "CSI DeleteVolume volume=%s secrets=[userID userKey]\n", v.GetVolumeId())
		if _, err := d.ctrl.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: v.GetVolumeId(), Secrets: w.secrets}); err != nil {
			return w.fail("delete volume", err)
		}
		w.ok("delete volume", v.GetVolumeId())
	}
	fmt.Fprintf(stdout, "CSI DeleteSnapshot snapshot=%s secrets=[userID userKey]\n", snap.GetSnapshotId())
	if _, err := d.ctrl.DeleteSnapshot(ctx, &csipb.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshotId(), Secrets: w.secrets}); err != nil {
		return w.fail("delete snapshot", err)
	}
	w.ok("delete snapshot", snap.GetSnapshotId())
	fmt.Fprintf(stdout, "CSI DeleteVolume volume=%s secrets=[userID userKey]\n", vol.GetVolumeId())
	if _, err := d.ctrl.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: vol.GetVolumeId(), Secrets: w.secrets}); err != nil {
		return w.fail("delete volume", err)
	}
	w.ok("delete volume", vol.GetVolumeId())

	ls, err := c.Rbd(ctx, "ls", c.Pool)
	if err != nil {
		return fmt.Errorf("rbd ls %s: %w", c.Pool, err)
	}
	if left := strings.Fields(string(ls)); len(left) > 0 {
		return fmt.Errorf("CSI walk-through: images left in pool %s after delete: %v", c.Pool, left)
	}
	fmt.Fprintf(stdout, "$ rbd ls %s   (after delete)\n  (no images)\n", c.Pool)
	fmt.Fprintf(stdout, "purerbd demo: CSI walk-through OK: every volume and snapshot is gone.\n\n")
	return nil
}

// create calls CreateVolume and shows the image rbd info sees.
func (w *csiWalk) create(ctx context.Context, step, name string, size int64, src *csipb.VolumeContentSource) (*csipb.Volume, error) {
	from := ""
	switch {
	case src.GetSnapshot() != nil:
		from = " source=snapshot:" + src.GetSnapshot().GetSnapshotId()
	case src.GetVolume() != nil:
		from = " source=volume:" + src.GetVolume().GetVolumeId()
	}
	fmt.Fprintf(w.out, "CSI CreateVolume name=%s required=%d MiB parameters=clusterID:%s,pool:%s%s secrets=[userID userKey]\n",
		name, size>>20, w.params["clusterID"], w.params["pool"], from)
	r, err := w.d.ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{
		Name:          name,
		CapacityRange: &csipb.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csipb.VolumeCapability{{
			AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "ext4"}},
		}},
		Parameters:          w.params,
		Secrets:             w.secrets,
		VolumeContentSource: src,
	})
	if err != nil {
		return nil, w.fail(step, err)
	}
	v := r.GetVolume()
	w.ok(step, fmt.Sprintf("volume ID %s (%d MiB)", v.GetVolumeId(), v.GetCapacityBytes()>>20))
	id, err := csi.ParseVolumeID(v.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := w.rbd(ctx, "ls", w.c.Pool); err != nil {
		return nil, err
	}
	return v, w.rbd(ctx, "info", w.c.Pool+"/"+id.Image)
}

func (w *csiWalk) ok(step, what string) {
	fmt.Fprintf(w.out, "  -> %s: OK: %s\n", step, what)
}

func (w *csiWalk) fail(step string, err error) error {
	fmt.Fprintf(w.out, "  -> %s: FAILED: %v\n", step, err)
	return fmt.Errorf("CSI walk-through, %s: %w", step, err)
}

// rbd runs Ceph's rbd tool and prints its output, indented.
func (w *csiWalk) rbd(ctx context.Context, args ...string) error {
	out, err := w.c.Rbd(ctx, args...)
	if err != nil {
		return fmt.Errorf("rbd %s: %w", strings.Join(args, " "), err)
	}
	fmt.Fprintf(w.out, "$ rbd %s\n", strings.Join(args, " "))
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Fprintf(w.out, "  %s\n", line)
	}
	return nil
}
