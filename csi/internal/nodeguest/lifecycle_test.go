package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/nbd/kernel"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// TestLifecycleGuest walks one volume through the whole CSI lifecycle
// against the purerbd-csi binary serving both roles on the real
// cluster, as a CO would: CreateVolume, NodeStage (attach, mkfs, mount),
// NodePublish, writes, NodeGetVolumeStats, ControllerExpandVolume and
// NodeExpandVolume (online), NodeUnpublish, NodeUnstage (device free),
// a second stage that finds the data, and DeleteVolume, after which
// the image is gone.
func TestLifecycleGuest(t *testing.T) {
	g := needGuest(t)
	if g == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := startBinary(t, "lifecycle", "--controller", "--node", "--nodeid", "vm-node", "--state-dir", "/run/purerbd-lifecycle")
	const size, grown = 64 * mib, 128 * mib
	c := mountVolume("ext4", csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	stagePath, target := "/var/lib/kubelet/lifecycle/globalmount", "/var/lib/kubelet/lifecycle/pods/p1/mount"
	if err := os.MkdirAll(stagePath, 0o750); err != nil {
		t.Fatal(err)
	}

	var vol *csipb.Volume
	timed(t, "CreateVolume (64 MiB)", func() error {
		r, err := p.ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{
			Name: "pvc-lifecycle", CapacityRange: &csipb.CapacityRange{RequiredBytes: size},
			VolumeCapabilities: []*csipb.VolumeCapability{c}, Parameters: g.params(), Secrets: g.secrets,
		})
		if err != nil {
			return err
		}
		vol = r.GetVolume()
		id, err := csi.ParseVolumeID(vol.GetVolumeId())
		if err != nil {
			return err
		}
		if id.Pool != g.poolID || id.ClusterID != g.id || vol.GetCapacityBytes() != size {
			return fmt.Errorf("volume %s: %+v, %d bytes", vol.GetVolumeId(), id, vol.GetCapacityBytes())
		}
		return nil
	})
	id := vol.GetVolumeId()
	stage := func() error {
		_, err := p.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
			VolumeId: id, StagingTargetPath: stagePath, VolumeCapability: c, Secrets: g.secrets, VolumeContext: vol.GetVolumeContext(),
		})
		return err
	}
	var dev int
	timed(t, "NodeStageVolume (open, NBD attach, mkfs.ext4, mount)", func() error {
		if err := stage(); err != nil {
			return err
		}
		var err error
		if dev, err = findCookie(id); err != nil {
			return fmt.Errorf("no NBD device carries the volume: %w", err)
		}
		if l := mountInfo(stagePath); !strings.Contains(l, fmt.Sprintf(" - ext4 /dev/nbd%d ", dev)) {
			return fmt.Errorf("staging mount: %q", l)
		}
		return nil
	})
	var sum string
	timed(t, "NodePublishVolume + write 8 MiB", func() error {
		if _, err := p.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
			VolumeId: id, StagingTargetPath: stagePath, TargetPath: target, VolumeCapability: c, VolumeContext: vol.GetVolumeContext(),
		}); err != nil {
			return err
		}
		var err error
		sum, err = guestio.WriteRandomFile(target+"/data", 8*mib)
		return err
	})
	var total0 int64
	timed(t, "NodeGetVolumeStats", func() error {
		var err error
		total0, err = checkStats(ctx, p, id, target, 8*mib)
		return err
	})
	timed(t, "ControllerExpandVolume (64 -> 128 MiB)", func() error {
		return controllerExpand(ctx, p, g, id, c, grown)
	})
	timed(t, "NodeExpandVolume (online: NBD resize, resize2fs)", func() error {
		if err := nodeExpand(ctx, p, id, c, target, stagePath, grown); err != nil {
			return err
		}
		if b, _ := os.ReadFile(fmt.Sprintf("/sys/block/nbd%d/size", dev)); strings.TrimSpace(string(b)) != strconv.Itoa(grown/512) {
			return fmt.Errorf("nbd%d has %s sectors", dev, strings.TrimSpace(string(b)))
		}
		total, err := checkStats(ctx, p, id, target, 8*mib)
		if err != nil {
			return err
		}
		if total < total0+48*mib {
			return fmt.Errorf("file system size %d after the expansion, %d before", total, total0)
		}
		return guestio.CheckSum(target+"/data", sum)
	})
	timed(t, "NodeUnpublishVolume + NodeUnstageVolume (device free)", func() error {
		if _, err := p.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			return err
		}
		if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the target path is still there: %v", err)
		}
		if _, err := p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: stagePath}); err != nil {
			return err
		}
		if _, err := findCookie(id); !errors.Is(err, kernel.ErrNoSuchDevice) {
			return fmt.Errorf("a device still carries the volume: %v", err)
		}
		if l := mountInfo(stagePath); l != "" {
			return fmt.Errorf("still mounted: %q", l)
		}
		return nil
	})
	timed(t, "NodeStage again: the data is there, the file system grown", func() error {
		if err := stage(); err != nil {
			return err
		}
		if err := guestio.CheckSum(stagePath+"/data", sum); err != nil {
			return err
		}
		if _, err := checkStats(ctx, p, id, stagePath, 8*mib); err != nil {
			return err
		}
		_, err := p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: stagePath})
		return err
	})
	timed(t, "DeleteVolume: the image is gone", func() error {
		for range 2 { // idempotent
			if _, err := p.ctrl.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: id, Secrets: g.secrets}); err != nil {
				return err
			}
		}
		_, err := p.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
			VolumeId: id, StagingTargetPath: stagePath, VolumeCapability: c, Secrets: g.secrets, VolumeContext: vol.GetVolumeContext(),
		})
		if err := wantCode(err, codes.NotFound); err != nil {
			return fmt.Errorf("stage of the deleted volume: %w", err)
		}
		return nil
	})
}

// controllerExpand grows a volume to size with ControllerExpandVolume,
// which must ask for the node's expansion.
func controllerExpand(ctx context.Context, p *binaryPlugin, g *guestCluster, id string, c *csipb.VolumeCapability, size int64) error {
	r, err := p.ctrl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{
		VolumeId: id, CapacityRange: &csipb.CapacityRange{RequiredBytes: size}, Secrets: g.secrets, VolumeCapability: c,
	})
	if err != nil {
		return err
	}
	if r.GetCapacityBytes() != size || !r.GetNodeExpansionRequired() {
		return fmt.Errorf("expand answered %v", r)
	}
	return nil
}

// nodeExpand grows a published volume's device and file system to size
// with NodeExpandVolume.
func nodeExpand(ctx context.Context, p *binaryPlugin, id string, c *csipb.VolumeCapability, target, stagePath string, size int64) error {
	r, err := p.node.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{
		VolumeId: id, VolumePath: target, StagingTargetPath: stagePath, VolumeCapability: c,
		CapacityRange: &csipb.CapacityRange{RequiredBytes: size},
	})
	if err != nil {
		return err
	}
	if r.GetCapacityBytes() != size {
		return fmt.Errorf("capacity %d", r.GetCapacityBytes())
	}
	return nil
}

// checkStats checks NodeGetVolumeStats of a file system volume: bytes
// and inodes, at least used bytes in use, the volume healthy. It returns
// the file system's size.
func checkStats(ctx context.Context, p *binaryPlugin, id, path string, used int64) (int64, error) {
	r, err := p.node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: path})
	if err != nil {
		return 0, err
	}
	var bytes, inodes *csipb.VolumeUsage
	for _, u := range r.GetUsage() {
		switch u.GetUnit() {
		case csipb.VolumeUsage_BYTES:
			bytes = u
		case csipb.VolumeUsage_INODES:
			inodes = u
		}
	}
	if bytes == nil || inodes == nil || bytes.GetUsed() < used || bytes.GetTotal() < bytes.GetUsed()+bytes.GetAvailable() ||
		inodes.GetTotal() == 0 || inodes.GetUsed() == 0 {
		return 0, fmt.Errorf("stats %v", r)
	}
	h, err := p.node.NodeGetVolumeHealth(ctx, &csipb.NodeGetVolumeHealthRequest{VolumeId: id})
	if err != nil {
		return 0, err
	}
	if e := h.GetVolumeHealth().GetHealthStatuses(); len(e) != 0 {
		return 0, fmt.Errorf("volume unhealthy: %v", e)
	}
	return bytes.GetTotal(), nil
}
