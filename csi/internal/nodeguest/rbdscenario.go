package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
	"github.com/purerbd/purerbd/nbd/ublk"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// rbdScenario is the node scenario on a real RBD image (node_rbd_vm_test.go
// in package csi boots the cluster in a network namespace and the guest
// on a tap there), the node plugin being the purerbd-csi binary driven
// over its unix socket as the kubelet drives it: NodeStage ext4,
// publish, write, SIGKILL of the binary with writes in flight, restart
// of the binary and reattach, data intact, online
// expand after the image is grown through package rbd (the controller's
// part), unpublish and unstage. It prints "FILE <name> <sha256> <bytes>"
// for each file written, for the host to check in `rbd export`.
type rbdScenario struct {
	scenario
	mon, user, key, pool, image string
	poolID                      int64
	vol                         string
	binary                      string // the purerbd-csi binary
	krbd                        bool
	kills                       int    // SIGKILLs of the plugin under the writers, restarted at once
	mapImage, purerbd           string // -map-image: the same for `purerbd nbd map` of it
	device                      string // the device type the plugin must choose at its defaults: nbd or ublk
	secrets                     map[string]string
	block                       rbdBlock // vol "" without -block-image
	xfs                         rbdXFS   // vol "" without -xfs-image
}

func runRBDScenario(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("rbd-scenario", flag.ContinueOnError)
	r := &rbdScenario{scenario: scenario{Report: guestio.NewReport()}}
	fs.StringVar(&r.mon, "mon", "", "mon_host of the cluster")
	fs.StringVar(&r.user, "user", "admin", "Ceph user, without client.")
	keyring := fs.String("keyring", "/etc/ceph/keyring", "keyring holding the user's key")
	fs.StringVar(&r.pool, "pool", "rbd", "pool name")
	fs.Int64Var(&r.poolID, "pool-id", 0, "pool id")
	fs.StringVar(&r.image, "image", "", "image, ext4 is made on it; it must be 256 MiB (it is grown to expandedSize)")
	fs.StringVar(&r.block.image, "block-image", "", "also stage this image as a raw block volume across the restart (8 MiB at least)")
	fs.StringVar(&r.xfs.image, "xfs-image", "", "also stage this image with xfs, a writer on it across the restart (320 MiB at least)")
	fs.StringVar(&r.binary, "binary", "/bin/purerbd-csi", "the purerbd-csi binary, run as the node plugin")
	fs.BoolVar(&r.krbd, "krbd", false, "at the end, map the image with the kernel's rbd driver and print its checksum")
	fs.StringVar(&r.mapImage, "map-image", "", "also map this image with `purerbd nbd map` and SIGKILL/--reattach it -kills times under a writer (8 MiB at least)")
	fs.StringVar(&r.purerbd, "purerbd", "/bin/purerbd", "the purerbd binary, for -map-image")
	fs.StringVar(&r.device, "device", "nbd", "the kind of device the plugin, at its defaults, must serve the volumes through on this kernel: nbd or ublk")
	fs.IntVar(&r.kills, "kills", 0, "SIGKILL the plugin this many times under the writers, restarting it at once each time, and report the stalls")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if r.mon == "" || r.image == "" || r.poolID == 0 {
		return errors.New("-mon, -pool-id and -image are required")
	}
	var err error
	if r.key, err = readKey(*keyring); err != nil {
		return err
	}
	r.secrets = map[string]string{"userID": r.user, "userKey": r.key}
	r.vol = csi.VolumeID{ClusterID: clusterID, Pool: r.poolID, Image: r.image}.String()
	if r.block.image != "" {
		r.block.vol = csi.VolumeID{ClusterID: clusterID, Pool: r.poolID, Image: r.block.image}.String()
	}
	if r.xfs.image != "" {
		r.xfs.vol = csi.VolumeID{ClusterID: clusterID, Pool: r.poolID, Image: r.xfs.image}.String()
	}
	err = r.run(ctx)
	if r.p != nil {
		r.p.kill()
	}
	return r.Finish(err)
}

// readKey returns the key of a keyring file ("key = ..." line).
func readKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("keyring: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && strings.TrimSpace(k) == "key" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("keyring %s: no key", path)
}

// expandedSize is what the ext4 volume's image is grown to (from 256
// MiB: room for the writers of twenty restarts).
const expandedSize = 512 * mib

// startPlugin starts the purerbd-csi binary as the node plugin, at its
// default settings.
func (r *rbdScenario) startPlugin(ctx context.Context, name string) error {
	var err error
	r.p, err = startCSIBinary(ctx, r.binary, name)
	return err
}

func (r *rbdScenario) stageRBD(ctx context.Context) error {
	_, err := r.p.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
		VolumeId: r.vol, StagingTargetPath: staging, VolumeCapability: rwo, Secrets: r.secrets,
		VolumeContext: map[string]string{"clusterID": clusterID, "pool": r.pool, "imageName": r.image},
	})
	return err
}

func (r *rbdScenario) publishRBD(ctx context.Context) error {
	_, err := r.p.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId: r.vol, StagingTargetPath: staging, TargetPath: target1, VolumeCapability: rwo, Secrets: r.secrets,
	})
	return err
}

func (r *rbdScenario) run(ctx context.Context) error {
	if err := r.Step("setup: modules, config", r.setup); err != nil {
		return err
	}
	if err := r.Step("purerbd-csi --node start", func() error { return r.startPlugin(ctx, "plugin-1") }); err != nil {
		return err
	}
	if err := r.Step("NodeStage ext4 on RBD (open, attach, mkfs, mount)", func() error {
		if err := r.stageRBD(ctx); err != nil {
			return err
		}
		name, err := r.volumeDevice(ctx, r.vol)
		if err != nil {
			return err
		}
		r.devName = name
		r.devIdx, _ = strconv.Atoi(strings.TrimLeft(name, "nbdulk"))
		r.Facts["device"] = "/dev/" + name
		return r.stageRBD(ctx) // idempotent
	}); err != nil {
		return err
	}
	var sumA string
	if err := r.Step("NodePublish rw, write 8 MiB", func() error {
		if err := r.publishRBD(ctx); err != nil {
			return err
		}
		var err error
		sumA, err = guestio.WriteRandomFile(target1+"/A", 8*mib)
		return err
	}); err != nil {
		return err
	}
	if r.xfs.vol != "" {
		if err := r.Step("NodeStage + NodePublish xfs on RBD (mkfs.xfs, mount), write 8 MiB, start a writer", func() error {
			return r.startXFS(ctx)
		}); err != nil {
			return err
		}
	}

	// The block volume's writer starts last and stops first: it writes
	// on the device from offset 0, which it must not fill.
	if r.block.vol != "" {
		if err := r.Step("NodeStage + NodePublish a raw block volume on RBD, start a writer on the device", func() error {
			return r.stageBlock(ctx)
		}); err != nil {
			return err
		}
	}
	writer := startStreamWriter(target1 + "/B")
	if !writer.WaitProgress(4, 60*time.Second) {
		return errors.New("the writer does not progress")
	}
	ext4 := &heldWriter{w: writer}
	held := map[string]*heldWriter{"ext4": ext4}
	if r.xfs.vol != "" {
		held["xfs"] = &r.xfs.writer
	}
	if r.block.vol != "" {
		held["block"] = &r.block.writer
	}
	if r.kills > 0 {
		if err := r.Step(fmt.Sprintf("SIGKILL the plugin %d times under the writers, restart it at once: stalls", r.kills), func() error {
			return r.repeatedKills(ctx, held)
		}); err != nil {
			return err
		}
	}
	if r.kills > 0 {
		if err := r.Step("SIGTERM the plugin under the writers (an orderly restart), start it again: stalls", func() error {
			return r.gracefulRestart(ctx, held)
		}); err != nil {
			return err
		}
	}
	killed := time.Now()
	for _, h := range held {
		h.lastBefore = h.w.LastSync()
	}
	r.p.kill()
	r.p = nil
	fmt.Printf("### [%6.2fs] purerbd-csi SIGKILLed with writes in flight\n", guestio.Uptime())
	if err := r.Step("I/O held while no plugin", func() error {
		time.Sleep(300 * time.Millisecond)
		heldBefore := map[string]int64{}
		for what, h := range held {
			heldBefore[what] = h.w.Synced()
		}
		time.Sleep(1500 * time.Millisecond)
		for what, h := range held {
			if n := h.w.Synced() - heldBefore[what]; n > 1 {
				return fmt.Errorf("the %s writer synced %d chunks with no plugin", what, n)
			}
			h.watchResume()
		}
		return nil
	}); err != nil {
		return err
	}
	if err := r.Step("purerbd-csi restart (reopens the images, takes the locks and the devices over)", func() error {
		if err := r.startPlugin(ctx, "plugin-2"); err != nil {
			return err
		}
		r.Timings["restart: exec to Probe ready (reopen + reattach)"] = r.p.startup
		return nil
	}); err != nil {
		return err
	}
	r.Timings["restart: SIGKILL to serving again"] = time.Since(killed).Seconds()
	// The block writer first (the stalls were taken as the writers
	// resumed, whatever the order of these steps).
	if r.block.vol != "" {
		if err := r.Step("block: blocked writes resume", func() error {
			return r.blockResumed(killed)
		}); err != nil {
			return err
		}
	}
	var resB guestio.Result
	if err := r.Step("blocked writes resume, nothing lost", func() error {
		var err error
		resB, err = ext4.finish("ext4", killed, r.Timings, r.Facts,
			"restart: I/O stall (last write synced before SIGKILL to first after)", "writer_bytes_across_kill")
		if !ext4.resumedAt.IsZero() {
			// The devices are reattached before the binary serves: writes
			// may resume before its first Probe answer.
			r.Timings["restart: SIGKILL to writes resumed"] = ext4.resumedAt.Sub(killed).Seconds()
		}
		if err != nil {
			return err
		}
		if err := guestio.CheckSum(target1+"/A", sumA); err != nil {
			return err
		}
		return guestio.CheckSum(target1+"/B", resB.Sum)
	}); err != nil {
		return err
	}
	if r.xfs.vol != "" {
		if err := r.Step("xfs: blocked writes resume, nothing lost", func() error {
			return r.xfsResumed(killed)
		}); err != nil {
			return err
		}
	}
	if r.block.vol != "" {
		if err := r.Step("block volume after restart: what the writer wrote reads back (O_DIRECT), written again", func() error {
			return r.checkBlock(ctx)
		}); err != nil {
			return err
		}
		if err := r.Step("block volume: discard, zero-out and punch-hole on the device read back as zeroes", r.zeroBlock); err != nil {
			return err
		}
	}
	if r.device == "ublk" {
		if err := r.Step("ublk: each volume kept its device across the restarts", func() error { return r.checkSameDevices(ctx) }); err != nil {
			return err
		}
	} else if err := r.Step("kernel log: the NBD devices reconnected to the new plugin", r.checkReconnects); err != nil {
		return err
	}
	if err := r.Step("after restart: stage and publish are idempotent, volume healthy", func() error {
		if err := r.stageRBD(ctx); err != nil {
			return err
		}
		if err := r.publishRBD(ctx); err != nil {
			return err
		}
		return r.healthy(ctx, r.vol)
	}); err != nil {
		return err
	}
	if err := r.Step("NodeExpandVolume online after rbd resize (256 -> 512 MiB, resize2fs)", func() error {
		return r.expand(ctx, sumA)
	}); err != nil {
		return err
	}
	if r.xfs.vol != "" {
		if err := r.Step("xfs: unstage, stage again (remount): every byte verifies; unstage", func() error {
			return r.remountXFS(ctx)
		}); err != nil {
			return err
		}
	}
	fmt.Printf("FILE A %s %d\n", sumA, 8*mib)
	fmt.Printf("FILE B %s %d\n", resB.Sum, resB.Bytes)
	if err := r.Step("NodeUnpublish + NodeUnstage: device free, image closed", func() error {
		if _, err := r.p.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: r.vol, TargetPath: target1}); err != nil {
			return err
		}
		for range 2 {
			if _, err := r.p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: r.vol, StagingTargetPath: staging}); err != nil {
				return err
			}
		}
		if r.block.vol != "" {
			if err := r.unstageBlock(ctx); err != nil {
				return fmt.Errorf("block volume: %w", err)
			}
			if err := r.checkFree(ctx, r.block.vol); err != nil {
				return fmt.Errorf("block volume: %w", err)
			}
		}
		return r.checkFree(ctx, r.vol)
	}); err != nil {
		return err
	}
	if r.mapImage != "" {
		if err := r.Step(fmt.Sprintf("purerbd nbd map: SIGKILL %d times under a writer, --reattach at once: stalls, nothing lost", r.kills), func() error {
			return r.mapKills(ctx)
		}); err != nil {
			return err
		}
	}
	if r.krbd {
		return r.Step("kernel rbd driver maps the image: a third reader", r.kernelRBD)
	}
	return nil
}

// checkReconnects finds the reconnection of each device in the kernel
// log (the restarted plugin gave the kernel new sockets).
func (r *rbdScenario) checkReconnects() error {
	idxs := []int{r.devIdx}
	for _, vol := range []string{r.block.vol, r.xfs.vol} {
		if vol == "" {
			continue
		}
		idx, err := findCookie(vol)
		if err != nil {
			return err
		}
		idxs = append(idxs, idx)
	}
	for _, idx := range idxs {
		lines, ok := reconnects(idx)
		for _, l := range lines {
			fmt.Println("    dmesg:", l)
		}
		if !ok {
			return fmt.Errorf("no reconnection of /dev/nbd%d in the kernel log", idx)
		}
	}
	return nil
}

// volumeDevice returns the device that carries vol, which must be of
// the kind the scenario expects the plugin to choose (-device).
func (r *rbdScenario) volumeDevice(ctx context.Context, vol string) (string, error) {
	name, err := volumeDevice(ctx, vol)
	if err != nil {
		return "", err
	}
	want := map[string]string{"nbd": "nbd", "ublk": "ublkb"}[r.device]
	if want == "" || !strings.HasPrefix(name, want) {
		return "", fmt.Errorf("the plugin serves the volume through /dev/%s; on this kernel, at its defaults, it must choose %s", name, r.device)
	}
	return name, nil
}

// checkSameDevices checks that the restarted plugins took over each
// volume's ublk device (user recovery), rather than making new ones.
func (r *rbdScenario) checkSameDevices(ctx context.Context) error {
	name, err := r.volumeDevice(ctx, r.vol)
	if err != nil {
		return err
	}
	if name != r.devName {
		return fmt.Errorf("the ext4 volume moved from /dev/%s to /dev/%s", r.devName, name)
	}
	ids, err := ublk.IDs()
	if err != nil {
		return err
	}
	want := 1
	for _, vol := range []string{r.block.vol, r.xfs.vol} {
		if vol == "" {
			continue
		}
		want++
		if _, err := r.volumeDevice(ctx, vol); err != nil {
			return err
		}
	}
	if len(ids) != want {
		return fmt.Errorf("the kernel has ublk devices %v, want one per staged volume (%d)", ids, want)
	}
	fmt.Printf("    ublk devices %v, one per volume, the same across the restarts\n", ids)
	return nil
}

// kernelRBD maps the image with rbd.ko (libceph's own msgr2 and cephx)
// and prints "KRBD <sha256> <bytes>" of the whole device for the host to
// compare with its export. The key goes to sysfs, never to the console.
func (r *rbdScenario) kernelRBD() error {
	if err := guestio.LoadModules("rbd"); err != nil {
		return err
	}
	// rbd.ko defaults to single_major=Y: /sys/bus/rbd/add then fails
	spec := fmt.Sprintf("%s name=%s,secret=%s,ms_mode=prefer-crc %s %s -", r.mon, r.user, r.key, r.pool, r.image)
	if err := os.WriteFile("/sys/bus/rbd/add_single_major", []byte(spec), 0o200); err != nil {
		return fmt.Errorf("map with rbd.ko: %w", err)
	}
	var f *os.File
	var err error
	for i := 0; i < 250; i++ {
		if f, err = os.Open("/dev/rbd0"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	f.Close()
	if err != nil {
		return err
	}
	fmt.Printf("KRBD %s %d\n", hex.EncodeToString(h.Sum(nil)), n)
	return os.WriteFile("/sys/bus/rbd/remove_single_major", []byte("0"), 0o200)
}

// expand grows the image as the controller would (through package rbd,
// from a second client: the plugin's cooperative lock is handed over for
// the resize), then asks the node to grow the device and the file system.
func (r *rbdScenario) expand(ctx context.Context, sumA string) error {
	t := time.Now()
	conn, err := rados.Connect(ctx, rados.Config{MonHost: r.mon, Name: "client." + r.user, Key: r.key})
	if err != nil {
		return err
	}
	defer conn.Close()
	ioc, err := conn.IOContext(ctx, r.pool, "")
	if err != nil {
		return err
	}
	img, err := rbd.Open(ctx, ioc, r.image, rbd.OpenOptions{})
	if err != nil {
		return err
	}
	if err := img.Resize(ctx, expandedSize); err != nil {
		img.CloseContext(ctx)
		return fmt.Errorf("rbd resize: %w", err)
	}
	if err := img.CloseContext(ctx); err != nil {
		return err
	}
	r.Timings["expand: rbd resize by a second client"] = time.Since(t).Seconds()
	res, err := r.p.node.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{
		VolumeId: r.vol, VolumePath: target1, StagingTargetPath: staging, VolumeCapability: rwo,
		CapacityRange: &csipb.CapacityRange{RequiredBytes: expandedSize},
	})
	if err != nil {
		return err
	}
	if res.GetCapacityBytes() != expandedSize {
		return fmt.Errorf("capacity %d", res.GetCapacityBytes())
	}
	if size, _ := os.ReadFile(fmt.Sprintf("/sys/block/%s/size", r.devName)); strings.TrimSpace(string(size)) != strconv.Itoa(expandedSize/512) {
		return fmt.Errorf("device size %s sectors", size)
	}
	return guestio.CheckSum(target1+"/A", sumA)
}

// setup loads the file system modules (the node loads nbd.ko itself) and
// writes the cluster config naming the cluster's monitors.
func (r *rbdScenario) setup() error {
	mods := []string{"crc32c", "ext4"}
	if r.xfs.vol != "" {
		mods = append(mods, "xfs")
	}
	if err := guestio.LoadModules(mods...); err != nil {
		return err
	}
	// resize2fs finds the mount point of a device in /etc/mtab.
	os.Symlink("/proc/mounts", "/etc/mtab")
	for _, d := range []string{filepath.Dir(configPath), filepath.Dir(socketPath), staging, filepath.Dir(target1)} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}
	cfg, err := json.Marshal([]map[string]any{{"clusterID": clusterID, "monitors": strings.Split(r.mon, ",")}})
	if err != nil {
		return err
	}
	return os.WriteFile(configPath, cfg, 0o644)
}
