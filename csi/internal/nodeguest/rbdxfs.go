package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/purerbd/purerbd/nbd/kernel"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// rbdXFS is the xfs volume of the rbd scenario: staged beside the ext4
// one, a writer of its own runs on it across the plugin's SIGKILL and
// restart; afterwards it is unstaged and staged again, and every byte
// written before and across the restart must read back from the
// remounted file system.
type rbdXFS struct {
	vol, image string
	sumX       string // the file written before the writer
	writer     heldWriter
	res        guestio.Result
}

// xTarget is where the xfs volume is published.
var xTarget = kubelet + "/pods/pod-x/volumes/kubernetes.io~csi/pvc-3/mount"

// xfsCap is the xfs volume's capability: one writer.
var xfsCap = &csipb.VolumeCapability{
	AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "xfs"}},
	AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

func (r *rbdScenario) stageXFS(ctx context.Context) error {
	_, err := r.p.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
		VolumeId: r.xfs.vol, StagingTargetPath: xStaging, VolumeCapability: xfsCap, Secrets: r.secrets,
		VolumeContext: map[string]string{"clusterID": clusterID, "pool": r.pool, "imageName": r.xfs.image},
	})
	if err != nil {
		return err
	}
	if l := mountInfo(xStaging); !strings.Contains(l, " - xfs /dev/nbd") && !strings.Contains(l, " - xfs /dev/ublkb") {
		return fmt.Errorf("no xfs mounted at the staging path: %q", l)
	}
	return nil
}

func (r *rbdScenario) publishXFS(ctx context.Context) error {
	_, err := r.p.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId: r.xfs.vol, StagingTargetPath: xStaging, TargetPath: xTarget, VolumeCapability: xfsCap, Secrets: r.secrets,
	})
	return err
}

// startXFS stages (mkfs.xfs on the blank image) and publishes the xfs
// volume, writes a file and starts the writer.
func (r *rbdScenario) startXFS(ctx context.Context) error {
	for _, d := range []string{xStaging, filepath.Dir(xTarget)} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}
	if err := r.stageXFS(ctx); err != nil {
		return err
	}
	if err := r.publishXFS(ctx); err != nil {
		return err
	}
	var err error
	if r.xfs.sumX, err = guestio.WriteRandomFile(xTarget+"/X", 8*mib); err != nil {
		return err
	}
	r.xfs.writer.w = startStreamWriter(xTarget + "/B")
	if !r.xfs.writer.w.WaitProgress(4, 60*time.Second) {
		return errors.New("the xfs writer does not progress")
	}
	return nil
}

// xfsResumed waits for the writer to resume after the restart, reports
// its stall, lets it write some more and stops it.
func (r *rbdScenario) xfsResumed(killed time.Time) error {
	var err error
	r.xfs.res, err = r.xfs.writer.finish("xfs", killed, r.Timings, r.Facts,
		"restart: xfs I/O stall (last write synced before SIGKILL to first after)", "xfs_writer_bytes_across_kill")
	if err != nil {
		return err
	}
	if err := guestio.CheckSum(xTarget+"/X", r.xfs.sumX); err != nil {
		return err
	}
	return guestio.CheckSum(xTarget+"/B", r.xfs.res.Sum)
}

// remountXFS unpublishes and unstages the xfs volume (unmount, NBD
// disconnect, image closed), stages it again and checks every byte of
// both files on the new mount, then unstages it for good.
func (r *rbdScenario) remountXFS(ctx context.Context) error {
	t := time.Now()
	if _, err := r.p.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: r.xfs.vol, TargetPath: xTarget}); err != nil {
		return err
	}
	if _, err := r.p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: r.xfs.vol, StagingTargetPath: xStaging}); err != nil {
		return err
	}
	r.Timings["xfs: unpublish + unstage"] = time.Since(t).Seconds()
	if d, err := volumeDevice(ctx, r.xfs.vol); !errors.Is(err, kernel.ErrNoSuchDevice) {
		return fmt.Errorf("a device still carries the xfs volume after the unstage: %s %v", d, err)
	}
	if l := mountInfo(xStaging); l != "" {
		return fmt.Errorf("xfs still mounted: %q", l)
	}
	t = time.Now()
	if err := r.stageXFS(ctx); err != nil {
		return fmt.Errorf("stage again: %w", err)
	}
	r.Timings["xfs: stage again (mount, log recovery if any)"] = time.Since(t).Seconds()
	if err := guestio.CheckSum(xStaging+"/X", r.xfs.sumX); err != nil {
		return err
	}
	if err := guestio.CheckSum(xStaging+"/B", r.xfs.res.Sum); err != nil {
		return err
	}
	fmt.Printf("    xfs after remount: X (8 MiB) and B (%d bytes, written across the restart) verify\n", r.xfs.res.Bytes)
	_, err := r.p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: r.xfs.vol, StagingTargetPath: xStaging})
	return err
}

// mountInfo returns the mountinfo line of the mount at path, or "".
func mountInfo(path string) string {
	m, _ := os.ReadFile("/proc/self/mountinfo")
	line := ""
	for _, l := range strings.Split(string(m), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == path {
			line = l
		}
	}
	return line
}
