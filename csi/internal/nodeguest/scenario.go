package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/internal/nodestate"
	"github.com/purerbd/purerbd/nbd/kernel"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
	"github.com/purerbd/purerbd/nbd/ublk"
)

const (
	socketPath = "/run/csi/csi.sock"
	imageDir   = "/tmp/images"
	configPath = "/etc/purerbd/config.json"
	clusterID  = "vm-cluster"
	cephKey    = "AQBvbm9ub25vbm9ub25vbm9ub25vbm9ub25vbg=="
	kubelet    = "/var/lib/kubelet"
	mib        = 1 << 20
	// ioTimeout is the kernel's request timeout: a request in flight when
	// the plugin dies is resent after it.
	ioTimeout = 6 * time.Second
)

var (
	fsVol    = csi.VolumeID{ClusterID: clusterID, Pool: 2, Image: "csi-vol-fs"}.String()
	blockVol = csi.VolumeID{ClusterID: clusterID, Pool: 2, Image: "csi-vol-blk"}.String()
	secrets  = map[string]string{"userID": "csi-node", "userKey": cephKey}
	staging  = kubelet + "/plugins/kubernetes.io/csi/rbd.purerbd.io/0123/globalmount"
	target1  = kubelet + "/pods/pod-a/volumes/kubernetes.io~csi/pvc-1/mount"
	target2  = kubelet + "/pods/pod-b/volumes/kubernetes.io~csi/pvc-1/mount"
	bStaging = kubelet + "/plugins/kubernetes.io/csi/volumeDevices/staging/pvc-2"
	xfsVol   = csi.VolumeID{ClusterID: clusterID, Pool: 2, Image: "csi-vol-xfs"}.String()
	xStaging = kubelet + "/plugins/kubernetes.io/csi/rbd.purerbd.io/0456/globalmount"
	bTarget  = kubelet + "/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-2/pod-c"
	bTargetR = kubelet + "/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-2/pod-d"
)

type scenario struct {
	*guestio.Report
	p       *plugin
	devIdx  int
	devName string // nbdN or ublkbN, of the file system volume
}

func runScenario(ctx context.Context) error {
	s := &scenario{Report: guestio.NewReport()}
	err := s.run(ctx)
	if s.p != nil {
		s.p.kill()
	}
	if err == nil {
		timeouts := 0
		for _, l := range strings.Split(guestio.DmesgTail(2000), "\n") {
			if strings.Contains(l, "nbd") && (strings.Contains(l, "timed out") || strings.Contains(l, "I/O error")) {
				fmt.Println("    dmesg:", l)
				timeouts++
			}
		}
		s.Facts["kernel_nbd_errors_or_timeouts"] = timeouts
	}
	return s.Finish(err)
}

func mountCap(mode csipb.VolumeCapability_AccessMode_Mode, flags ...string) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: flags}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode},
	}
}

var (
	rwo = mountCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, "noatime")
	rwx = &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}
)

func (s *scenario) stage(ctx context.Context, vol, path string, c *csipb.VolumeCapability) error {
	_, err := s.p.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
		VolumeId: vol, StagingTargetPath: path, VolumeCapability: c, Secrets: secrets,
		VolumeContext: map[string]string{"clusterID": clusterID, "pool": "rbd", "imageName": "x"},
	})
	return err
}

func (s *scenario) publish(ctx context.Context, vol, stagingPath, target string, c *csipb.VolumeCapability, ro bool) error {
	_, err := s.p.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId: vol, StagingTargetPath: stagingPath, TargetPath: target, VolumeCapability: c, Readonly: ro, Secrets: secrets,
	})
	return err
}

func wantCode(err error, c codes.Code) error {
	if status.Code(err) != c {
		return fmt.Errorf("want %v, got %v", c, err)
	}
	fmt.Printf("    refused as expected: %v: %s\n", c, status.Convert(err).Message())
	return nil
}

func (s *scenario) run(ctx context.Context) error {
	if err := s.Step("setup: modules, config, images", func() error { return setup(ctx) }); err != nil {
		return err
	}
	if err := s.Step("plugin start (empty state)", func() error {
		var err error
		s.p, err = startPlugin(ctx, "plugin-1")
		return err
	}); err != nil {
		return err
	}
	if err := s.Step("NodeGetInfo + NodeGetCapabilities", func() error {
		info, err := s.p.node.NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{})
		if err != nil {
			return err
		}
		if info.GetNodeId() != "vm-node" || info.GetAccessibleTopology().GetSegments()["topology.purerbd.io/zone"] != "vm" {
			return fmt.Errorf("node info %v", info)
		}
		caps, err := s.p.node.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
		if err != nil {
			return err
		}
		if len(caps.GetCapabilities()) != 5 {
			return fmt.Errorf("capabilities %v", caps)
		}
		return nil
	}); err != nil {
		return err
	}

	if err := s.Step("NodeStage ext4 (attach, mkfs, mount)", func() error {
		if err := s.stage(ctx, fsVol, staging, rwo); err != nil {
			return err
		}
		return s.checkStaged()
	}); err != nil {
		return err
	}
	if err := s.Step("NodeStage idempotency", func() error {
		if err := s.stage(ctx, fsVol, staging, rwo); err != nil {
			return fmt.Errorf("same request again: %w", err)
		}
		if err := wantCode(s.stage(ctx, fsVol, staging, mountCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER)), codes.AlreadyExists); err != nil {
			return fmt.Errorf("other mount flags: %w", err)
		}
		if err := wantCode(s.stage(ctx, fsVol, staging+"2", rwo), codes.AlreadyExists); err != nil {
			return fmt.Errorf("other staging path: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}

	var sumA string
	if err := s.Step("NodePublish rw + ro, write 8 MiB", func() error {
		if err := s.publish(ctx, fsVol, staging, target1, rwo, false); err != nil {
			return err
		}
		if err := s.publish(ctx, fsVol, staging, target1, rwo, false); err != nil {
			return fmt.Errorf("publish again: %w", err)
		}
		if err := wantCode(s.publish(ctx, fsVol, staging, target1, rwo, true), codes.AlreadyExists); err != nil {
			return fmt.Errorf("publish again read-only: %w", err)
		}
		if err := s.publish(ctx, fsVol, staging, target2, rwo, true); err != nil {
			return fmt.Errorf("second target, read-only: %w", err)
		}
		var err error
		if sumA, err = guestio.WriteRandomFile(target1+"/A", 8*mib); err != nil {
			return err
		}
		if err := guestio.CheckSum(target2+"/A", sumA); err != nil {
			return fmt.Errorf("through the read-only target: %w", err)
		}
		if err := os.WriteFile(target2+"/nope", nil, 0o644); !errors.Is(err, unix.EROFS) {
			return fmt.Errorf("write through the read-only target: %v", err)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := s.Step("metrics: the 8 MiB written, the volume served", func() error {
		return s.checkMetrics(ctx, "metrics_after_8MiB", fsVol,
			atLeast("purerbd_volume_written_bytes_total", 8*mib),
			atLeast("purerbd_volume_requests_total", 1, "op", "write"),
			atLeast("purerbd_volume_requests_total", 1, "op", "flush"),
			eq("purerbd_volume_request_errors_total", 0, "op", "write"),
			eq("purerbd_volume_io_held", 0),
			eq("purerbd_volume_info", 1, "mode", "filesystem"),
			eq("purerbd_volume_reattaches_total", 0, "reason", "takeover"),
			eq("purerbd_volume_stalls_total", 0))
	}); err != nil {
		return err
	}
	if err := s.Step("NodeGetVolumeStats + NodeGetVolumeHealth", func() error {
		st, err := s.p.node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: fsVol, VolumePath: target1, StagingTargetPath: staging})
		if err != nil {
			return err
		}
		u := st.GetUsage()
		if len(u) != 2 || u[0].GetTotal() < 50*mib || u[0].GetUsed() < 8*mib || u[1].GetTotal() == 0 {
			return fmt.Errorf("stats %v", st)
		}
		s.Facts["stats_bytes_total_used"] = []int64{u[0].GetTotal(), u[0].GetUsed()}
		if err := wantCode(func() error {
			_, err := s.p.node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: fsVol, VolumePath: "/tmp"})
			return err
		}(), codes.NotFound); err != nil {
			return err
		}
		return s.healthy(ctx, fsVol)
	}); err != nil {
		return err
	}

	// The plugin dies with writes in flight and comes back.
	writer := startStreamWriter(target1 + "/B")
	if !writer.WaitProgress(4, 30*time.Second) {
		return errors.New("the writer does not progress")
	}
	killed := time.Now()
	s.p.kill()
	s.p = nil
	fmt.Printf("### [%6.2fs] plugin SIGKILLed with writes in flight\n", guestio.Uptime())
	if err := s.Step("I/O held while no plugin", func() error {
		time.Sleep(300 * time.Millisecond)
		before := writer.Synced()
		if writer.WaitProgress(2, 1500*time.Millisecond) {
			return fmt.Errorf("the writer synced %d chunks with no plugin", writer.Synced()-before)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := s.Step("plugin restart (takes the device over)", func() error {
		var err error
		s.p, err = startPlugin(ctx, "plugin-2")
		if err != nil {
			return err
		}
		s.Timings["restart: plugin Start (reopen + reattach)"] = s.p.startup
		return nil
	}); err != nil {
		return err
	}
	s.Timings["restart: SIGKILL to serving again"] = time.Since(killed).Seconds()
	var sumB string
	if err := s.Step("blocked writes resume, nothing lost", func() error {
		t := time.Now()
		if !writer.WaitProgress(4, 90*time.Second) {
			return errors.New("the writer is still blocked")
		}
		s.Timings["restart: serving to writes resumed"] = time.Since(t).Seconds()
		r := writer.Finish()
		if r.Err != nil {
			return r.Err
		}
		// The new process counts the takeover, the stall it ended and
		// the writes since.
		if err := s.checkMetrics(ctx, "metrics_after_restart", fsVol,
			eq("purerbd_volume_reattaches_total", 1, "reason", "takeover"),
			eq("purerbd_volume_stalls_total", 1),
			eq("purerbd_volume_io_held", 0),
			atLeast("purerbd_volume_written_bytes_total", 1)); err != nil {
			return err
		}
		sumB = r.Sum
		s.Facts["writer_bytes_across_kill"] = r.Bytes
		if err := guestio.CheckSum(target1+"/A", sumA); err != nil {
			return err
		}
		return guestio.CheckSum(target1+"/B", sumB)
	}); err != nil {
		return err
	}
	if err := s.Step("after restart: calls are idempotent, volume healthy", func() error {
		if err := s.stage(ctx, fsVol, staging, rwo); err != nil {
			return err
		}
		if err := s.publish(ctx, fsVol, staging, target1, rwo, false); err != nil {
			return err
		}
		if _, err := s.p.node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: fsVol, VolumePath: target2}); err != nil {
			return err
		}
		return s.healthy(ctx, fsVol)
	}); err != nil {
		return err
	}

	if err := s.Step("NodeExpandVolume online (64 -> 128 MiB, resize2fs)", func() error {
		var before unix.Statfs_t
		unix.Statfs(target1, &before)
		// The controller's part: grow the image.
		if err := os.Truncate(imagePath("csi-vol-fs"), 128*mib); err != nil {
			return err
		}
		r, err := s.p.node.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{
			VolumeId: fsVol, VolumePath: target1, StagingTargetPath: staging, VolumeCapability: rwo,
			CapacityRange: &csipb.CapacityRange{RequiredBytes: 128 * mib},
		})
		if err != nil {
			return err
		}
		if r.GetCapacityBytes() != 128*mib {
			return fmt.Errorf("capacity %d", r.GetCapacityBytes())
		}
		if size, _ := os.ReadFile(fmt.Sprintf("/sys/block/nbd%d/size", s.devIdx)); strings.TrimSpace(string(size)) != strconv.Itoa(128*mib/512) {
			return fmt.Errorf("device size %s sectors", size)
		}
		var after unix.Statfs_t
		unix.Statfs(target1, &after)
		s.Facts["fs_blocks_before_after_expand"] = []uint64{before.Blocks, after.Blocks}
		if after.Blocks <= before.Blocks*3/2 {
			return fmt.Errorf("file system blocks %d -> %d", before.Blocks, after.Blocks)
		}
		if _, err := s.p.node.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{VolumeId: fsVol, VolumePath: target1,
			CapacityRange: &csipb.CapacityRange{RequiredBytes: 128 * mib}}); err != nil {
			return fmt.Errorf("again: %w", err)
		}
		if err := wantCode(func() error {
			_, err := s.p.node.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{VolumeId: fsVol, VolumePath: target1,
				CapacityRange: &csipb.CapacityRange{RequiredBytes: 256 * mib}})
			return err
		}(), codes.OutOfRange); err != nil {
			return err
		}
		return guestio.CheckSum(target1+"/A", sumA)
	}); err != nil {
		return err
	}

	if err := s.Step("graceful handover under writes (SIGTERM + restart)", func() error {
		w := startStreamWriter(target1 + "/C")
		if !w.WaitProgress(4, 30*time.Second) {
			return errors.New("the writer does not progress")
		}
		t := time.Now()
		closeTook, err := s.p.stop(ctx)
		s.p = nil
		if err != nil {
			return err
		}
		s.Timings["handover: plugin Close (release)"] = closeTook
		if s.p, err = startPlugin(ctx, "plugin-3"); err != nil {
			return err
		}
		if !w.WaitProgress(4, 90*time.Second) {
			return errors.New("the writer is still blocked after the handover")
		}
		s.Timings["handover: SIGTERM to writes resumed"] = time.Since(t).Seconds()
		r := w.Finish()
		if r.Err != nil {
			return r.Err
		}
		return guestio.CheckSum(target1+"/C", r.Sum)
	}); err != nil {
		return err
	}

	if err := s.Step("restart without credentials or image: not served until a call brings them", func() error {
		return s.restartWithoutAccess(ctx, sumA)
	}); err != nil {
		return err
	}

	if err := s.Step("block volume: stage, publish, O_DIRECT I/O, stats", func() error { return s.blockVolume(ctx) }); err != nil {
		return err
	}
	if err := s.Step("block volume: cluster stalls past the request timeout, the device recovers", func() error {
		return s.stallAndRecover(ctx)
	}); err != nil {
		return err
	}
	if err := s.Step("block volume: plugin dies before writing its state", func() error { return s.lostState(ctx) }); err != nil {
		return err
	}

	if err := s.Step("node races: stages at the volume limit, a stage during Close", func() error { return s.nodeRaces(ctx) }); err != nil {
		return err
	}
	if err := s.Step("xfs volume: mkfs.xfs, write, online expand with xfs_growfs, unstage", func() error {
		return s.xfsVolume(ctx)
	}); err != nil {
		return err
	}

	if err := s.Step("NodeUnpublish (twice) + NodeUnstage (twice): device free", func() error {
		for range 2 {
			for _, t := range []string{target1, target2} {
				if _, err := s.p.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: fsVol, TargetPath: t}); err != nil {
					return err
				}
				if _, err := os.Stat(t); !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("target %s still there: %v", t, err)
				}
			}
		}
		for range 2 {
			if _, err := s.p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: fsVol, StagingTargetPath: staging}); err != nil {
				return err
			}
		}
		return s.checkFree(ctx, fsVol)
	}); err != nil {
		return err
	}

	if err := s.Step("stage again read-only: the data is all there", func() error {
		ro := mountCap(csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY)
		if err := s.stage(ctx, fsVol, staging, ro); err != nil {
			return err
		}
		if err := guestio.CheckSum(staging+"/A", sumA); err != nil {
			return err
		}
		if err := guestio.CheckSum(staging+"/B", sumB); err != nil {
			return err
		}
		if err := os.WriteFile(staging+"/nope", nil, 0o644); !errors.Is(err, unix.EROFS) {
			return fmt.Errorf("write to a read-only staged volume: %v", err)
		}
		if ro, _ := os.ReadFile(fmt.Sprintf("/sys/block/nbd%d/ro", s.devIdx)); strings.TrimSpace(string(ro)) != "1" {
			return fmt.Errorf("device not read-only (%q)", ro)
		}
		if _, err := s.p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: fsVol, StagingTargetPath: staging}); err != nil {
			return err
		}
		return s.checkFree(ctx, fsVol)
	}); err != nil {
		return err
	}
	return nil
}

// checkStaged checks the kernel's side of the staged file system volume.
func (s *scenario) checkStaged() error {
	idx, err := findCookie(fsVol)
	if err != nil {
		return err
	}
	s.devIdx, s.devName = idx, fmt.Sprintf("nbd%d", idx)
	dev := "/dev/" + s.devName
	s.Facts["device"] = dev
	m, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var line string
	for _, l := range strings.Split(string(m), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == staging {
			line = l
		}
	}
	if !strings.Contains(line, " - ext4 "+dev+" ") || !strings.Contains(line, "noatime") {
		return fmt.Errorf("staging mount: %q", line)
	}
	st, err := os.ReadDir(csi.DefaultStateDir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range st {
		names = append(names, e.Name())
		info, _ := e.Info()
		if strings.HasSuffix(e.Name(), ".secret") && info.Mode().Perm() != 0o600 {
			return fmt.Errorf("secret file mode %v", info.Mode())
		}
		b, _ := os.ReadFile(filepath.Join(csi.DefaultStateDir, e.Name()))
		if strings.HasSuffix(e.Name(), ".json") && bytes.Contains(b, []byte(cephKey)) {
			return errors.New("the state record holds the key")
		}
	}
	s.Facts["state_files"] = names
	if len(names) != 2 {
		return fmt.Errorf("state directory holds %v, want a record and a secret", names)
	}
	return nil
}

func (s *scenario) healthy(ctx context.Context, vol string) error {
	h, err := s.p.node.NodeGetVolumeHealth(ctx, &csipb.NodeGetVolumeHealthRequest{VolumeId: vol})
	if err != nil {
		return err
	}
	if n := len(h.GetVolumeHealth().GetHealthStatuses()); n != 0 {
		return fmt.Errorf("volume unhealthy: %v", h.GetVolumeHealth())
	}
	return nil
}

// checkFree checks that no device carries the volume any more and that
// its state is gone.
func (s *scenario) checkFree(ctx context.Context, vol string) error {
	if d, err := volumeDevice(ctx, vol); !errors.Is(err, kernel.ErrNoSuchDevice) {
		return fmt.Errorf("a device still carries the volume: %s %v", d, err)
	}
	if strings.HasPrefix(s.devName, "nbd") {
		c, err := kernel.Open(ctx, kernel.ClientConfig{})
		if err != nil {
			return err
		}
		defer c.Close()
		st, ok, err := c.DeviceStatus(ctx, s.devIdx)
		if err != nil || (ok && st.Connected) {
			return fmt.Errorf("nbd%d: %+v %v %v", s.devIdx, st, ok, err)
		}
	}
	all, _ := filepath.Glob(filepath.Join(csi.DefaultStateDir, "*"))
	var left []string
	for _, p := range all {
		// the plugin's role lock and its record are the plugin's, not
		// the volume's (purerbd-csi --node keeps them for its successor)
		if !strings.HasPrefix(filepath.Base(p), "node.lock") {
			left = append(left, p)
		}
	}
	if len(left) != 0 {
		return fmt.Errorf("state left: %v", left)
	}
	m, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(m), fmt.Sprintf("/dev/%s ", s.devName)) {
		return fmt.Errorf("%s still mounted", s.devName)
	}
	return nil
}

// blockVolume stages and publishes a raw block volume.
func (s *scenario) blockVolume(ctx context.Context) error {
	if err := os.MkdirAll(bStaging, 0o750); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(bTarget), 0o750); err != nil {
		return err
	}
	if err := s.stage(ctx, blockVol, bStaging, rwx); err != nil {
		return err
	}
	m, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(m), " "+bStaging+" ") {
		return errors.New("something is mounted at a block volume's staging path")
	}
	if err := s.publish(ctx, blockVol, bStaging, bTarget, rwx, false); err != nil {
		return err
	}
	if err := s.publish(ctx, blockVol, bStaging, bTarget, rwx, false); err != nil {
		return fmt.Errorf("again: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(bTarget, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return fmt.Errorf("target is not a block device: %v", err)
	}
	data := make([]byte, 4*mib)
	rand.Read(data)
	if err := guestio.DirectIO(bTarget, data, 8*mib); err != nil {
		return err
	}
	// The bytes are in the image.
	f, err := os.Open(imagePath("csi-vol-blk"))
	if err != nil {
		return err
	}
	back := make([]byte, len(data))
	_, err = f.ReadAt(back, 8*mib)
	f.Close()
	if err != nil || !bytes.Equal(back, data) {
		return fmt.Errorf("the image holds other bytes than written through the target (%v)", err)
	}
	if err := s.readOnlyBlock(ctx, data); err != nil {
		return fmt.Errorf("read-only publication: %w", err)
	}
	stats, err := s.p.node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: blockVol, VolumePath: bTarget})
	if err != nil {
		return err
	}
	if u := stats.GetUsage(); len(u) != 1 || u[0].GetTotal() != 32*mib {
		return fmt.Errorf("block stats %v", stats)
	}
	return s.healthy(ctx, blockVol)
}

// readOnlyBlock publishes the block volume, staged read-write and
// published read-write at bTarget, read-only at bTargetR: refused while
// the read-write publication is there (the read-only flag is the whole
// device's); once it is gone, writes through the read-only target fail
// (a read-only bind mount alone would not stop them) and reads work; a
// read-write publication is refused while the reader is there, and
// writes again once it is gone. data is at 8 MiB.
func (s *scenario) readOnlyBlock(ctx context.Context, data []byte) error {
	unpublish := func(target string) error {
		_, err := s.p.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: blockVol, TargetPath: target})
		return err
	}
	if err := wantCode(s.publish(ctx, blockVol, bStaging, bTargetR, rwx, true), codes.FailedPrecondition); err != nil {
		return fmt.Errorf("read-only next to read-write: %w", err)
	}
	if err := unpublish(bTarget); err != nil {
		return err
	}
	if err := s.publish(ctx, blockVol, bStaging, bTargetR, rwx, true); err != nil {
		return err
	}
	if err := guestio.DirectIO(bTargetR, data, 8*mib); err == nil {
		return errors.New("a write through the read-only target succeeded")
	} else if !errors.Is(err, unix.EROFS) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
		return fmt.Errorf("a write through the read-only target failed with %v, not EROFS, EPERM or EACCES", err)
	} else {
		fmt.Printf("    write through the read-only target refused: %v\n", err)
	}
	back, err := directRead(bTargetR, len(data), 8*mib)
	if err != nil {
		return err
	}
	if !bytes.Equal(back, data) {
		return errors.New("the read-only target reads other bytes")
	}
	if err := wantCode(s.publish(ctx, blockVol, bStaging, bTarget, rwx, false), codes.FailedPrecondition); err != nil {
		return fmt.Errorf("read-write next to read-only: %w", err)
	}
	if err := unpublish(bTargetR); err != nil {
		return err
	}
	if err := s.publish(ctx, blockVol, bStaging, bTarget, rwx, false); err != nil {
		return err
	}
	return guestio.DirectIO(bTarget, data, 8*mib)
}

// restartWithoutAccess kills the plugin, takes away the credentials kept
// for the file system volume and its image, and restarts the plugin: the
// volume is reported INACCESSIBLE, a NodeStage with secrets fails while
// the image is missing and brings the volume back once it is there.
func (s *scenario) restartWithoutAccess(ctx context.Context, sumA string) error {
	s.p.kill()
	s.p = nil
	rec, err := stateFile(fsVol)
	if err != nil {
		return err
	}
	if err := os.Remove(strings.TrimSuffix(rec, ".json") + ".secret"); err != nil {
		return err
	}
	away := imagePath("csi-vol-fs") + ".away"
	if err := os.Rename(imagePath("csi-vol-fs"), away); err != nil {
		return err
	}
	if s.p, err = startPlugin(ctx, "plugin-4"); err != nil {
		return err
	}
	h, err := s.p.node.NodeGetVolumeHealth(ctx, &csipb.NodeGetVolumeHealthRequest{VolumeId: fsVol})
	if err != nil {
		return err
	}
	e := h.GetVolumeHealth().GetHealthStatuses()
	if len(e) != 1 || e[0].GetStatus() != csipb.VolumeHealthErrorType_INACCESSIBLE || e[0].GetReason() != "NotServed" {
		return fmt.Errorf("health of a volume waiting for secrets: %v", h)
	}
	fmt.Printf("    health: %s: %s\n", e[0].GetReason(), e[0].GetMessage())
	if _, err := s.p.node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: fsVol, VolumePath: target1}); err != nil {
		return fmt.Errorf("stats while not served: %w", err)
	}
	if err := wantCode(s.stage(ctx, fsVol, staging, rwo), codes.NotFound); err != nil {
		return fmt.Errorf("stage with the image missing: %w", err)
	}
	if err := os.Rename(away, imagePath("csi-vol-fs")); err != nil {
		return err
	}
	if err := s.stage(ctx, fsVol, staging, rwo); err != nil {
		return fmt.Errorf("stage with the image back: %w", err)
	}
	if err := s.healthy(ctx, fsVol); err != nil {
		return err
	}
	if err := writeFileSync(target1+"/D", []byte("after the takeover")); err != nil {
		return err
	}
	return guestio.CheckSum(target1+"/A", sumA)
}

// stallAndRecover holds all I/O longer than the kernel's request
// timeout while reads are in flight on every connection: the kernel
// gives up on the connections, the device (or, once none is left, the
// plugin's watchdog) hands it new ones, and the reads complete.
func (s *scenario) stallAndRecover(ctx context.Context) error {
	want := make([]byte, mib)
	f, err := os.Open(imagePath("csi-vol-blk"))
	if err != nil {
		return err
	}
	_, err = f.ReadAt(want, 8*mib)
	f.Close()
	if err != nil {
		return err
	}
	if err := os.WriteFile(stallPath, nil, 0o644); err != nil {
		return err
	}
	start := time.Now()
	// One reader per CPU, so that each of the device's queues (one per
	// connection) has a request in flight.
	errs := make(chan error, 2)
	for cpu := range 2 {
		go func() { errs <- pinnedRead(cpu, bTarget, 8*mib, want) }()
	}
	unstall := time.AfterFunc(ioTimeout+2*time.Second, func() { os.Remove(stallPath) })
	defer unstall.Stop()
	for range 2 {
		if err := <-errs; err != nil {
			os.Remove(stallPath)
			return err
		}
	}
	s.Timings["stall: reads held, then done"] = time.Since(start).Seconds()
	// The kernel gave up on the connections whose requests timed out:
	// either the device replaced them at the kernel's LINK_DEAD
	// notices, or, when every connection's session had ended first, the
	// node's watchdog reattached the device.
	// (the file system volume, stalled too, announces its own)
	var ev []string
	for len(ev) < 2 || ev[1] != blockVol {
		if ev, err = s.p.expect(ctx, "replaced", "reattached"); err != nil {
			return err
		}
	}
	s.Facts["stall_recovered_by"] = ev[0]
	// The metrics count what mended it.
	mended := atLeast("purerbd_volume_healed_connections_total", 1)
	if ev[0] == "reattached" {
		mended = atLeast("purerbd_volume_reattaches_total", 1, "reason", "connections_lost")
	}
	if err := s.checkMetrics(ctx, "metrics_after_stall", blockVol, mended, eq("purerbd_volume_info", 1, "mode", "block")); err != nil {
		return err
	}
	// The device works on.
	data := make([]byte, mib)
	rand.Read(data)
	if err := guestio.DirectIO(bTarget, data, 12*mib); err != nil {
		return err
	}
	return s.healthy(ctx, blockVol)
}

// pinnedRead reads with O_DIRECT from a thread bound to one CPU, and
// checks the bytes.
func pinnedRead(cpu int, path string, off int64, want []byte) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return err
	}
	buf, err := unix.Mmap(-1, 0, len(want), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(buf)
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.ReadAt(buf, off); err != nil {
		return fmt.Errorf("read on CPU %d: %w", cpu, err)
	}
	if !bytes.Equal(buf, want) {
		return fmt.Errorf("read on CPU %d: other bytes", cpu)
	}
	return nil
}

// lostState plays a plugin that died between attaching a device and
// writing its state: a NodeStage then takes the device that carries the
// volume's cookie over, and a NodeUnstage without state disconnects it.
func (s *scenario) lostState(ctx context.Context) error {
	crash := func(name string) error {
		s.p.kill()
		s.p = nil
		rec, err := stateFile(blockVol)
		if err != nil {
			return err
		}
		os.Remove(strings.TrimSuffix(rec, ".json") + ".secret")
		if err := os.Remove(rec); err != nil {
			return err
		}
		s.p, err = startPlugin(ctx, name)
		return err
	}
	idx, err := findCookie(blockVol)
	if err != nil {
		return err
	}
	if err := crash("plugin-5"); err != nil {
		return err
	}
	if err := s.stage(ctx, blockVol, bStaging, rwx); err != nil {
		return fmt.Errorf("stage over a device left behind: %w", err)
	}
	if again, err := findCookie(blockVol); err != nil || again != idx {
		return fmt.Errorf("the volume moved from nbd%d to nbd%d (%v)", idx, again, err)
	}
	if err := s.publish(ctx, blockVol, bStaging, bTarget, rwx, false); err != nil {
		return err
	}
	data := make([]byte, mib)
	rand.Read(data)
	if err := guestio.DirectIO(bTarget, data, 16*mib); err != nil {
		return err
	}
	if _, err := s.p.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: blockVol, TargetPath: bTarget}); err != nil {
		return err
	}
	if _, err := os.Stat(bTarget); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("block target still there: %v", err)
	}
	if err := crash("plugin-6"); err != nil {
		return err
	}
	if _, err := s.p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: blockVol, StagingTargetPath: bStaging}); err != nil {
		return err
	}
	if _, err := findCookie(blockVol); !errors.Is(err, kernel.ErrNoSuchDevice) {
		return fmt.Errorf("a device still carries the block volume: %v", err)
	}
	return nil
}

// stateFile returns the node state record of a volume.
func stateFile(vol string) (string, error) {
	l, _ := filepath.Glob(filepath.Join(csi.DefaultStateDir, "*.json"))
	for _, p := range l {
		var r struct {
			VolumeID string `json:"volumeID"`
		}
		b, _ := os.ReadFile(p)
		if json.Unmarshal(b, &r) == nil && r.VolumeID == vol {
			return p, nil
		}
	}
	return "", fmt.Errorf("no state record for %s among %v", vol, l)
}

func writeFileSync(path string, b []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// xfsVolume stages an xfs volume with a single writer, grows it online
// and unstages it.
func (s *scenario) xfsVolume(ctx context.Context) error {
	c := &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "xfs"}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER},
	}
	if err := s.stage(ctx, xfsVol, xStaging, c); err != nil {
		return err
	}
	m, _ := os.ReadFile("/proc/self/mountinfo")
	mounted := false
	for _, l := range strings.Split(string(m), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == xStaging && strings.Contains(l, " - xfs /dev/nbd") {
			mounted = true
		}
	}
	if !mounted {
		return errors.New("no xfs mounted at the staging path")
	}
	sum, err := guestio.WriteRandomFile(xStaging+"/X", 4*mib)
	if err != nil {
		return err
	}
	var before, after unix.Statfs_t
	unix.Statfs(xStaging, &before)
	if err := os.Truncate(imagePath("csi-vol-xfs"), 480*mib); err != nil {
		return err
	}
	r, err := s.p.node.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{
		VolumeId: xfsVol, VolumePath: xStaging, StagingTargetPath: xStaging,
		CapacityRange: &csipb.CapacityRange{RequiredBytes: 480 * mib},
	})
	if err != nil {
		return err
	}
	unix.Statfs(xStaging, &after)
	s.Facts["xfs_blocks_before_after_expand"] = []uint64{before.Blocks, after.Blocks}
	if r.GetCapacityBytes() != 480*mib || after.Blocks <= before.Blocks*5/4 {
		return fmt.Errorf("capacity %d, blocks %d -> %d", r.GetCapacityBytes(), before.Blocks, after.Blocks)
	}
	if err := guestio.CheckSum(xStaging+"/X", sum); err != nil {
		return err
	}
	if _, err := s.p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: xfsVol, StagingTargetPath: xStaging}); err != nil {
		return err
	}
	if _, err := findCookie(xfsVol); !errors.Is(err, kernel.ErrNoSuchDevice) {
		return fmt.Errorf("a device still carries the xfs volume: %v", err)
	}
	return nil
}

func imagePath(name string) string { return filepath.Join(imageDir, "2", name) }

// setup loads the file system modules (the node loads nbd.ko itself),
// writes the cluster config and creates the images.
func setup(ctx context.Context) error {
	if err := guestio.LoadModules("crc32c", "ext4", "xfs"); err != nil {
		return err
	}
	// resize2fs finds the mount point of a device in /etc/mtab.
	os.Symlink("/proc/mounts", "/etc/mtab")
	for _, d := range []string{filepath.Dir(configPath), filepath.Dir(socketPath), filepath.Join(imageDir, "2"), staging,
		filepath.Dir(target1), filepath.Dir(target2)} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}
	if err := os.WriteFile(configPath, []byte(`[{"clusterID":"`+clusterID+`","monitors":["192.0.2.1:3300"]}]`), 0o644); err != nil {
		return err
	}
	// mkfs.xfs makes nothing under 300 MiB.
	for name, size := range map[string]int64{"csi-vol-fs": 64 * mib, "csi-vol-blk": 32 * mib, "csi-vol-xfs": 320 * mib} {
		f, err := os.Create(imagePath(name))
		if err != nil {
			return err
		}
		if err := f.Truncate(size); err != nil {
			return err
		}
		f.Close()
	}
	return nil
}

// volumeDevice returns the name of the device that carries a volume
// (nbdN, by its cookie, or ublkbN, by its tag), or an error wrapping
// kernel.ErrNoSuchDevice when none does.
func volumeDevice(ctx context.Context, vol string) (string, error) {
	if idx, err := findCookie(vol); err == nil {
		return fmt.Sprintf("nbd%d", idx), nil
	}
	info, err := ublk.Find(ctx, nodestate.UblkTag(vol))
	if errors.Is(err, ublk.ErrNoDevice) || errors.Is(err, ublk.ErrUnsupported) {
		return "", kernel.ErrNoSuchDevice
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("ublkb%d", info.ID), nil
}

func findCookie(cookie string) (int, error) {
	entries, err := os.ReadDir("/sys/block")
	if err != nil {
		return -1, err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "nbd") {
			continue
		}
		b, _ := os.ReadFile("/sys/block/" + e.Name() + "/backend")
		if strings.TrimSpace(string(b)) == cookie {
			return strconv.Atoi(strings.TrimPrefix(e.Name(), "nbd"))
		}
	}
	return -1, kernel.ErrNoSuchDevice
}
