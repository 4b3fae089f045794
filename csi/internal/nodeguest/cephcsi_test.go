package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

var (
	cephCSIVolume = flag.String("cephcsi-volume", "", "ceph-csi handle of a volume laid out as ceph-csi leaves one, holding an ext4 file system (set by csi's TestNodeRBDInVM)")
	cephCSIImage  = flag.String("cephcsi-image", "", "that volume's image")
	cephCSIFile   = flag.String("cephcsi-file", "", "a file ceph-csi's node wrote in it, as NAME:SHA256")
)

// TestCephCSIVolumeGuest takes over a volume that ceph-csi provisioned
// and its node filled, as after deploy/MIGRATING.md's switch: the
// purerbd-csi binary, serving under ceph-csi's driver name, is called
// with the PersistentVolume's handle and the volume context ceph-csi's
// CreateVolume returned. ListVolumes lists the handle; NodeStage finds
// ceph-csi's file system and file; NodePublish and a write;
// ControllerExpandVolume and NodeExpandVolume online; a purerbd snapshot
// of it, a volume restored from that snapshot staged with both files,
// both deleted; unpublish and unstage. It prints "CEPHCSI-FILE <name>
// <sha256> <bytes>" for what it wrote; the host checks the image and the
// journal as ceph-csi would find them.
func TestCephCSIVolumeGuest(t *testing.T) {
	g := needGuest(t)
	if g == nil {
		return
	}
	if *cephCSIVolume == "" || *cephCSIImage == "" || *cephCSIFile == "" {
		t.Fatal("-cephcsi-volume, -cephcsi-image and -cephcsi-file are required with -guest")
	}
	ccName, ccSum, ok := strings.Cut(*cephCSIFile, ":")
	if !ok {
		t.Fatalf("-cephcsi-file %q: want NAME:SHA256", *cephCSIFile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := startBinary(t, "cephcsi", "--controller", "--node", "--nodeid", "vm-node", "--state-dir", "/run/purerbd-cephcsi",
		"--drivername", "rbd.csi.ceph.com")
	const size, grown = 64 * mib, 128 * mib
	id := *cephCSIVolume
	c := mountVolume("ext4", csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	// What ceph-csi's CreateVolume put in the PersistentVolume
	// (internal/rbd/controllerserver.go: the class's parameters, then
	// pool, journalPool and imageName).
	volCtx := map[string]string{"clusterID": g.id, "pool": g.pool, "journalPool": g.pool, "imageName": *cephCSIImage,
		"imageFeatures": "layering,exclusive-lock,object-map,fast-diff,deep-flatten", "mounter": "rbd-nbd",
		"csi.storage.k8s.io/pv/name": "pvc-cephcsi"}
	stagePath, target := "/var/lib/kubelet/cephcsi/globalmount", "/var/lib/kubelet/cephcsi/pods/p1/mount"
	cloneStage := "/var/lib/kubelet/cephcsi/clone-globalmount"
	for _, d := range []string{stagePath, cloneStage} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}

	timed(t, "GetPluginInfo and ListVolumes: ceph-csi's name, the volume by its handle", func() error {
		info, err := p.ident.GetPluginInfo(ctx, &csipb.GetPluginInfoRequest{})
		if err != nil {
			return err
		}
		if info.GetName() != "rbd.csi.ceph.com" {
			return fmt.Errorf("driver name %q", info.GetName())
		}
		r, err := p.ctrl.ListVolumes(ctx, &csipb.ListVolumesRequest{})
		if err != nil {
			return err
		}
		var ids []string
		for _, e := range r.GetEntries() {
			ids = append(ids, e.GetVolume().GetVolumeId())
			if e.GetVolume().GetVolumeId() == id && e.GetVolume().GetCapacityBytes() != size {
				return fmt.Errorf("listed with %d bytes", e.GetVolume().GetCapacityBytes())
			}
		}
		if !slices.Contains(ids, id) {
			return fmt.Errorf("ListVolumes: %q", ids)
		}
		return nil
	})
	var dev int
	timed(t, "NodeStageVolume by the handle: ceph-csi's file system and file", func() error {
		if _, err := p.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
			VolumeId: id, StagingTargetPath: stagePath, VolumeCapability: c, Secrets: g.secrets, VolumeContext: volCtx,
		}); err != nil {
			return err
		}
		var err error
		if dev, err = findCookie(id); err != nil {
			return fmt.Errorf("no NBD device carries the volume: %w", err)
		}
		if l := mountInfo(stagePath); !strings.Contains(l, fmt.Sprintf(" - ext4 /dev/nbd%d ", dev)) {
			return fmt.Errorf("staging mount: %q", l)
		}
		return guestio.CheckSum(stagePath+"/"+ccName, ccSum)
	})
	var sum string
	timed(t, "NodePublishVolume + write 4 MiB", func() error {
		if _, err := p.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
			VolumeId: id, StagingTargetPath: stagePath, TargetPath: target, VolumeCapability: c, VolumeContext: volCtx,
		}); err != nil {
			return err
		}
		var err error
		sum, err = guestio.WriteRandomFile(target+"/from-purerbd", 4*mib)
		return err
	})
	timed(t, "ControllerExpandVolume + NodeExpandVolume (64 -> 128 MiB, online)", func() error {
		if err := controllerExpand(ctx, p, g, id, c, grown); err != nil {
			return err
		}
		if err := nodeExpand(ctx, p, id, c, target, stagePath, grown); err != nil {
			return err
		}
		total, err := checkStats(ctx, p, id, target, 4*mib)
		if err != nil {
			return err
		}
		if total < 96*mib {
			return fmt.Errorf("file system size %d after the expansion", total)
		}
		return nil
	})
	timed(t, "CreateSnapshot of the handle, a volume restored from it staged: both files", func() error {
		sn, err := p.ctrl.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{Name: "snapshot-cephcsi", SourceVolumeId: id, Secrets: g.secrets})
		if err != nil {
			return err
		}
		if src := sn.GetSnapshot().GetSourceVolumeId(); src != id {
			return fmt.Errorf("snapshot source %q", src)
		}
		vr, err := p.ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{
			Name: "pvc-cephcsi-restored", CapacityRange: &csipb.CapacityRange{RequiredBytes: grown},
			VolumeCapabilities: []*csipb.VolumeCapability{c}, Parameters: g.params(), Secrets: g.secrets,
			VolumeContentSource: &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
				Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: sn.GetSnapshot().GetSnapshotId()}}},
		})
		if err != nil {
			return err
		}
		clone := vr.GetVolume()
		if _, err := p.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
			VolumeId: clone.GetVolumeId(), StagingTargetPath: cloneStage, VolumeCapability: c, Secrets: g.secrets, VolumeContext: clone.GetVolumeContext(),
		}); err != nil {
			return fmt.Errorf("staging the restored volume: %w", err)
		}
		if err := guestio.CheckSum(cloneStage+"/"+ccName, ccSum); err != nil {
			return err
		}
		if err := guestio.CheckSum(cloneStage+"/from-purerbd", sum); err != nil {
			return err
		}
		if _, err := p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: clone.GetVolumeId(), StagingTargetPath: cloneStage}); err != nil {
			return err
		}
		if _, err := p.ctrl.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: clone.GetVolumeId(), Secrets: g.secrets}); err != nil {
			return err
		}
		_, err = p.ctrl.DeleteSnapshot(ctx, &csipb.DeleteSnapshotRequest{SnapshotId: sn.GetSnapshot().GetSnapshotId(), Secrets: g.secrets})
		return err
	})
	timed(t, "NodeUnpublishVolume + NodeUnstageVolume", func() error {
		if _, err := p.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			return err
		}
		_, err := p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: stagePath})
		return err
	})
	fmt.Printf("CEPHCSI-FILE from-purerbd %s %d\n", sum, 4*mib)
}
