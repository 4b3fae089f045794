package csi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
	"github.com/purerbd/purerbd/rados/radostest/netns"
)

// TestNodeRBDInVM runs the node service on real RBD images: a Ceph
// cluster (one mon, one OSD) bound to an address inside a network
// namespace of the test, the guest on a tap in that namespace (nothing
// routed to or from the root namespace, which blackholes the subnet).
// The scenario's images are made with rbd(8) inside the namespace; the
// key reaches the guest in its initramfs. In one boot:
//
// The scenario (nodeguest rbd-scenario), the node plugin being the
// purerbd-csi binary (--node, --nbd-io-timeout 6s) driven over its unix
// socket as the kubelet drives it: it stages ext4, publishes, writes; a
// raw block volume and an xfs volume are staged beside it; the binary
// is SIGKILLed with writes in flight on all three (a writer of synced
// chunks on each), started again and takes the devices over; the writers complete and every byte verifies; the guest prints
// the I/O stalls and finds each device's NBD reconnection in its kernel
// log; on the block device, discard, zero-out and punch hole read back
// as zeroes (checkZeroedBlock); the xfs volume is unstaged, staged again and verified on the new
// mount; the ext4 image is grown through package rbd and
// NodeExpandVolume grows the file system; unpublish and unstage free the
// devices.
//
// Then nodeguest's test binary drives purerbd-csi, its config.json
// naming the cluster's monitor in the namespace and its secrets
// directory in the initramfs, through:
// the whole lifecycle of one volume (CreateVolume, NodeStage,
// NodePublish, stats, ControllerExpandVolume + NodeExpandVolume,
// unpublish, unstage, DeleteVolume); two node plugins (node-a, node-b)
// of which the second cannot stage a single-writer volume the first
// holds (FAILED_PRECONDITION naming node-a) until it unstages; and
// csi-sanity, every spec (Node Service included) against the binary
// serving both roles.
//
// Then, on the host: the pool holds the scenario's images only (the
// binary's tests deleted theirs); `rbd export` (inside the namespace) of
// the ext4 image passes e2fsck -fn and holds the guest's files with the
// guest's checksums (debugfs cat), at the grown size; the guest kernel's
// own rbd driver, mapping the image after the unstage, read the same
// bytes as the export; the block image's export holds what the guest
// wrote across the restart; the xfs image's export passes xfs_repair -n.
// restartKills is how many times the scenario SIGKILLs the node plugin
// under the writers (issue #25 asks for 20).
const restartKills = 20

// restartCephDefaults puts back the Ceph defaults that the test
// clusters change and that bound a restart's stall: the monitors'
// paxos_propose_interval (the test clusters commit every 0.1 s to boot
// faster), which paces the commit of the blocklist entry that fences
// the dead plugin before its locks are broken.
var restartCephDefaults = map[string]string{"paxos_propose_interval": "1"}

func TestNodeRBDInVM(t *testing.T) {
	host := vmtest.FindHost(t)
	progs := rbdScenarioPrograms(t)
	t0 := time.Now()
	guest := vmtest.BuildGo(t, "github.com/purerbd/purerbd/csi/internal/nodeguest")
	guestTests := buildTestBinary(t, "./internal/nodeguest")
	plugin := vmtest.BuildGo(t, "github.com/purerbd/purerbd/cmd/purerbd-csi")
	cli := vmtest.BuildGo(t, "github.com/purerbd/purerbd/cmd/purerbd")
	tBuild := time.Since(t0)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute+vmtest.StallRoom)
	defer cancel()
	ns := netns.New(t, netns.Options{})
	t1 := time.Now()
	// Ceph's default settings where they bound a restart (a dead
	// client's watch lives 30 s, blocklist entries commit at the
	// monitors' pace), as the plugin runs at its own (startCSIBinary).
	cluster, err := cephcluster.Start(ctx, cephcluster.Options{Netns: ns.Name, BindAddr: ns.HostIP, Conf: restartCephDefaults})
	if err != nil {
		t.Fatal(err)
	}
	// registered after the namespace's: runs before it
	t.Cleanup(func() { cluster.Close() })
	tCluster := time.Since(t1)
	const image, blockImage, xfsImage, mapImage = "csi-vol-fs", "csi-vol-block", "csi-vol-xfs", "nbd-map"
	// mkfs.xfs makes nothing under 300 MiB; the images are thin; the raw
	// ones take their writers across twenty restarts.
	for _, c := range [][2]string{{image, "256M"}, {blockImage, "1G"}, {xfsImage, "1G"}, {mapImage, "1G"}} {
		if _, err := cluster.Rbd(ctx, "create", "--size", c[1], "--image-feature", "layering,exclusive-lock,object-map,fast-diff", "rbd/"+c[0]); err != nil {
			t.Fatal(err)
		}
	}
	poolID := poolIDOf(ctx, t, cluster)
	const clusterID = "vm-cluster" // as in nodeguest
	// A volume ceph-csi provisioned and filled, for TestCephCSIVolumeGuest.
	cephCSI := layOutCephCSIVolume(ctx, t, cluster, clusterID, poolID)
	files := rbdGuestFiles(t, cluster, clusterID)
	for name, p := range map[string]string{"/bin/nodeguest": guest, "/bin/nodeguest.test": guestTests, "/bin/purerbd-csi": plugin, "/bin/purerbd": cli} {
		files[name] = p
	}
	// The scenario (ext4, block and xfs across a SIGKILL of the
	// purerbd-csi node plugin), then the binary's tests: the lifecycle,
	// two nodes, csi-sanity. Each half runs even if the other
	// failed; the exit status is 0 only if both passed.
	scenario := fmt.Sprintf("/bin/nodeguest rbd-scenario -mon %s -pool %s -pool-id %d -image %s -block-image %s -xfs-image %s -map-image %s -keyring /etc/ceph/keyring -krbd -kills %d",
		cluster.MonAddrs[0], cluster.Pool, poolID, image, blockImage, xfsImage, mapImage, restartKills)
	binaryTests := fmt.Sprintf("/bin/nodeguest.test -test.run '^(%s)$' -test.v -test.timeout 20m -guest -cluster-id %s -pool %s -pool-id %d %s",
		strings.Join(guestBinaryTests, "|"), clusterID, cluster.Pool, poolID, cephCSI.guestArgs())

	var console strings.Builder
	res, err := vmtest.Run(ctx, t, host, vmtest.Config{
		Modules:  []string{"nbd", "ext4", "xfs", host.CRC32C(), "rbd"},
		Programs: progs,
		Files:    files,
		Command:  []string{"/bin/sh", "-c", scenario + "; s=$?; " + binaryTests + "; b=$?; exit $((s|b))"},
		Network:  &vmtest.Network{Netns: ns.Name, Tap: ns.Taps[0], GuestCIDR: ns.GuestCIDR(0), HostIP: ns.HostIP},
		Memory:   1024,
		Timeout:  14 * time.Minute,
		Output:   &console,
	})
	if res == nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Console, cluster.AdminKey) {
		t.Error("the key appeared on the guest's console")
	}
	sc, serr := res.Scenario()
	if err != nil || serr != nil {
		t.Fatalf("guest scenario failed (err %v, exit %d, %v); console:\n%s\ncluster logs:%s", err, res.ExitCode, serr, res.Console, cluster.LogTails(15))
	}
	checkBinaryTests(t, res)
	if res.ExitCode != 0 {
		t.Fatalf("the guest's command exited %d; console:\n%s", res.ExitCode, res.Console)
	}
	if os.Getenv("NBD_VM_CONSOLE") != "" {
		t.Logf("console:\n%s", res.Console)
	}
	// Everything the lifecycle, two-node and sanity tests made, they
	// deleted: the pool holds the scenario's images only.
	ls, err := cluster.Rbd(ctx, "ls", cluster.Pool)
	if err != nil {
		t.Fatal(err)
	}
	poolImages := []string{blockImage, image, cephCSI.image, xfsImage, mapImage}
	slices.Sort(poolImages)
	if got := strings.Join(strings.Fields(string(ls)), " "); got != strings.Join(poolImages, " ") {
		t.Errorf("images in the pool after the guest's tests: %q, want the scenario's four and the ceph-csi volume", got)
	}
	cephCSI.check(ctx, t, cluster, res)

	// The host's view: rbd export inside the namespace, e2fsck, debugfs.
	t2 := time.Now()
	exported := checkExt4Export(ctx, t, cluster, res, image)
	// The guest kernel's rbd driver read the same bytes.
	whole, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(whole)
	if k := res.Lines("KRBD "); len(k) != 1 || k[0] != fmt.Sprintf("%s %d", hex.EncodeToString(sum[:]), len(whole)) {
		t.Errorf("rbd.ko in the guest read %q; the export is %d bytes sha256 %s", k, len(whole), hex.EncodeToString(sum[:]))
	} else {
		t.Logf("rbd.ko in the guest read the whole image as rbd export did: sha256 %s…", k[0][:16])
	}
	checkBlockExport(ctx, t, cluster, res, blockImage)
	// The image `purerbd nbd map` served across its SIGKILLs: what the
	// guest's writer wrote, as librbd reads it.
	checkStream(ctx, t, cluster, res, "MAP ", "rbd/"+mapImage)
	checkXFSExport(ctx, t, cluster, xfsImage)
	tCheck := time.Since(t2)

	t.Logf("build nodeguest %.1fs; cluster in %s at %s up in %.1fs (boot %.1fs)", tBuild.Seconds(), ns.Name, cluster.MonHost(), tCluster.Seconds(), cluster.Started.Seconds())
	t.Logf("VM: boot to init %.2fs, network up %.2fs, whole run %.1fs (wall); host export + e2fsck + debugfs %.1fs",
		res.Boot.Seconds(), res.NetUp.Seconds(), res.Wall.Seconds(), tCheck.Seconds())
	sc.Log(t)
	if os.Getenv("NODE_VM_CONSOLE") != "" {
		t.Logf("console:\n%s", res.Console)
	}
}

// checkZeroedBlock checks, on the block image, what the guest's
// zeroing check did through its kernel device (nodeguest's rbdzero.go):
// the three 4 MiB objects from the ZEROES line's offset read as zeroes in
// the export (the punched one only if the kernel sent write zeroes), and
// rbd diff finds the discarded object, and the punched one, deallocated.
func checkZeroedBlock(ctx context.Context, t *testing.T, cluster *cephcluster.Cluster, res *vmtest.Result, spec string, export []byte) {
	t.Helper()
	const region = 4 << 20
	zl := res.Lines("ZEROES ")
	var off, maxZeroes int64
	var punch string
	if len(zl) != 1 {
		t.Fatalf("guest reported zeroing %q", zl)
	}
	if _, err := fmt.Sscan(zl[0], &off, &maxZeroes, &punch); err != nil || off < 0 || off+3*region > int64(len(export)) {
		t.Fatalf("ZEROES line %q (%v); the export is %d bytes", zl[0], err, len(export))
	}
	checked := int64(2 * region)
	if punch == "ok" {
		checked = 3 * region
	}
	if !bytes.Equal(export[off:off+checked], make([]byte, checked)) {
		t.Errorf("the block image's zeroed objects from %d do not read as zeroes in the export", off)
	}
	out, err := cluster.Rbd(ctx, "diff", "--format", "json", spec)
	if err != nil {
		t.Fatal(err)
	}
	var diff []struct {
		Offset int64 `json:"offset"`
		Length int64 `json:"length"`
	}
	if err := json.Unmarshal(out, &diff); err != nil {
		t.Fatalf("rbd diff: %v: %s", err, out)
	}
	holes := [][2]int64{{off, off + region}}
	if punch == "ok" {
		holes = append(holes, [2]int64{off + 2*region, off + 3*region})
	}
	for _, h := range holes {
		for _, d := range diff {
			if d.Offset < h[1] && h[0] < d.Offset+d.Length {
				t.Errorf("rbd diff: %d+%d allocated in the range %d-%d the guest discarded or punched", d.Offset, d.Length, h[0], h[1])
			}
		}
	}
	if punch == "ok" {
		t.Logf("block volume: discard and punch hole (NBD write zeroes, write_zeroes_max_bytes %d) deallocated their objects, zero-out zeroed", maxZeroes)
	} else {
		t.Logf("block volume: discard deallocated its object, zero-out zeroed; this kernel does not send NBD write zeroes (write_zeroes_max_bytes %d), punch hole refused", maxZeroes)
	}
}

// guestBinaryTests are the tests of nodeguest's test binary that the
// guest runs against the purerbd-csi binary.
var guestBinaryTests = []string{"TestLifecycleGuest", "TestTwoNodesGuest", "TestCephCSIVolumeGuest", "TestSanityGuest"}

// checkBinaryTests checks that each of guestBinaryTests passed in the
// guest and logs their step timings and the sanity suite's summary.
func checkBinaryTests(t *testing.T, res *vmtest.Result) {
	t.Helper()
	sanity := ""
	var nodePassed, nodeSkipped int
	for _, l := range strings.Split(res.Console, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.Contains(l, "passed:  Node Service "):
			nodePassed++
		case strings.Contains(l, "skipped: Node Service "):
			// The one Node spec that does not apply: the plugin does
			// not offer the (alpha) node storage health service.
			nodeSkipped++
			if !strings.Contains(l, "skipped: Node Service NodeGetStorageHealth ") {
				t.Errorf("a Node Service spec was skipped: %s", l)
			}
		}
		switch {
		case strings.Contains(l, "sanity: ") && strings.Contains(l, "specs passed"):
			sanity = l
			t.Log(l)
		case strings.Contains(l, "skipped: ") || strings.Contains(l, "FAILED: ") || strings.Contains(l, " step ") ||
			strings.Contains(l, " refused: ") || strings.Contains(l, "staged ") && strings.Contains(l, "after node-a"):
			t.Log(l)
		}
	}
	for _, name := range guestBinaryTests {
		if !strings.Contains(res.Console, "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass in the guest", name)
		}
	}
	var passed, failed, skipped int
	if i := strings.Index(sanity, "sanity: "); i < 0 {
		t.Error("no sanity summary in the guest's output")
	} else if _, err := fmt.Sscanf(sanity[i:], "sanity: %d specs passed, %d failed, %d skipped", &passed, &failed, &skipped); err != nil {
		t.Errorf("sanity summary %q: %v", sanity, err)
	} else if failed != 0 || passed == 0 {
		t.Errorf("csi-sanity in the guest: %d passed, %d failed", passed, failed)
	}
	t.Logf("csi-sanity's Node Service specs against purerbd-csi on RBD: %d passed, %d skipped", nodePassed, nodeSkipped)
	if nodePassed < 20 {
		t.Errorf("only %d Node Service specs passed", nodePassed)
	}
	if t.Failed() {
		t.Fatalf("the purerbd-csi tests in the guest failed; console:\n%s", res.Console)
	}
}

func lastLine(b []byte) string {
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	return l[len(l)-1]
}

// checkStream compares the start of image's `rbd export` with the
// guest's "<prefix><sha256> <bytes>" line.
func checkStream(ctx context.Context, t *testing.T, cluster *cephcluster.Cluster, res *vmtest.Result, prefix, image string) {
	t.Helper()
	lines := res.Lines(prefix)
	if len(lines) != 1 || len(strings.Fields(lines[0])) != 2 {
		t.Errorf("guest reported %q for %s", lines, image)
		return
	}
	want := strings.Fields(lines[0])
	exported := filepath.Join(t.TempDir(), "stream.img")
	if _, err := cluster.Rbd(ctx, "export", image, exported); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	fmt.Sscan(want[1], &n)
	if n <= 0 || n > len(b) {
		t.Errorf("%s%s; the export of %s is %d bytes", prefix, lines[0], image, len(b))
		return
	}
	if s := sha256.Sum256(b[:n]); hex.EncodeToString(s[:]) != want[0] {
		t.Errorf("%s: the export's first %d bytes differ from what the guest wrote", image, n)
		return
	}
	t.Logf("%s: the export's first %d bytes are as the guest wrote them across the restarts", image, n)
}

// rbdScenarioPrograms returns the host's file system programs the
// guest's rbd-scenario needs, failing t when one is missing.
func rbdScenarioPrograms(t *testing.T) []string {
	t.Helper()
	var progs []string
	for p, pkg := range map[string]string{"/sbin/mkfs.ext4": "e2fsprogs", "/sbin/resize2fs": "e2fsprogs",
		"/sbin/mkfs.xfs": "xfsprogs", "/sbin/xfs_growfs": "xfsprogs"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s not found: install the Debian package %s (%v)", p, pkg, err)
		}
		progs = append(progs, p)
	}
	for _, p := range []string{"e2fsck", "debugfs", "xfs_repair"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s not found: install the Debian packages e2fsprogs and xfsprogs (%v)", p, err)
		}
	}
	return progs
}

// poolIDOf returns the id of the cluster's pool.
func poolIDOf(ctx context.Context, t *testing.T, cluster *cephcluster.Cluster) int64 {
	t.Helper()
	out, err := cluster.Ceph(ctx, "osd", "pool", "ls", "detail", "-f", "json")
	if err != nil {
		t.Fatal(err)
	}
	var pools []struct {
		ID   int64  `json:"pool_id"`
		Name string `json:"pool_name"`
	}
	if err := json.Unmarshal(out, &pools); err != nil {
		t.Fatalf("pool ls: %v: %s", err, out)
	}
	for _, p := range pools {
		if p.Name == cluster.Pool {
			return p.ID
		}
	}
	t.Fatalf("pool %s not in %s", cluster.Pool, out)
	return 0
}

// rbdGuestFiles returns the guest's configuration files: mke2fs.conf,
// and the key in its initramfs, never on the kernel command line (a
// keyring for the scenario, the plugin's secrets directory and its
// cluster config naming the cluster's monitor).
func rbdGuestFiles(t *testing.T, cluster *cephcluster.Cluster, clusterID string) map[string]string {
	t.Helper()
	files := map[string]string{"/etc/mke2fs.conf": "/etc/mke2fs.conf"}
	etc := t.TempDir()
	for name, c := range map[string]string{
		"/etc/ceph/keyring":            "[client.admin]\n\tkey = " + cluster.AdminKey + "\n",
		"/etc/purerbd/secrets/userID":  "admin",
		"/etc/purerbd/secrets/userKey": cluster.AdminKey,
		"/etc/purerbd/config.json":     fmt.Sprintf(`[{"clusterID":%q,"monitors":[%q]}]`, clusterID, cluster.MonAddrs[0]),
	} {
		p := filepath.Join(etc, filepath.Base(name))
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
		files[name] = p
	}
	return files
}

// checkExt4Export checks the ext4 volume's image as the host reads it
// (rbd export): at the grown size, clean for e2fsck -fn, holding the
// files the guest reported (FILE lines) with their checksums. It
// returns the export's path.
func checkExt4Export(ctx context.Context, t *testing.T, cluster *cephcluster.Cluster, res *vmtest.Result, image string) string {
	t.Helper()
	exported := filepath.Join(t.TempDir(), image+".img")
	if _, err := cluster.Rbd(ctx, "export", "rbd/"+image, exported); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(exported)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 512<<20 {
		t.Errorf("exported image is %d bytes, want 512 MiB (grown in the guest)", st.Size())
	}
	if b, err := exec.CommandContext(ctx, "e2fsck", "-fn", exported).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn on the exported image: %v\n%s", err, b)
	} else {
		t.Logf("e2fsck -fn: %s", lastLine(b))
	}
	fileLines := res.Lines("FILE ")
	if len(fileLines) != 2 {
		t.Fatalf("guest reported files %q", fileLines)
	}
	for _, l := range fileLines {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("FILE line %q", l)
		}
		cmd := exec.CommandContext(ctx, "debugfs", "-R", "cat /"+f[0], exported)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("debugfs cat /%s: %v: %s", f[0], err, stderr.String())
		}
		sum := sha256.Sum256(stdout.Bytes())
		if got := hex.EncodeToString(sum[:]); got != f[1] || fmt.Sprint(stdout.Len()) != f[2] {
			t.Errorf("/%s in the export: %d bytes sha256 %s; the guest wrote %s bytes sha256 %s", f[0], stdout.Len(), got[:16], f[2], f[1][:16])
		} else {
			t.Logf("/%s in the export: %d bytes, sha256 %s… as the guest wrote", f[0], stdout.Len(), got[:16])
		}
	}
	return exported
}

// checkBlockExport checks the raw block volume's image: its first bytes
// as the guest wrote them across the restarts (BLOCK line), and the
// zeroed objects (checkZeroedBlock).
func checkBlockExport(ctx context.Context, t *testing.T, cluster *cephcluster.Cluster, res *vmtest.Result, blockImage string) {
	t.Helper()
	blockExport := filepath.Join(t.TempDir(), blockImage+".img")
	if _, err := cluster.Rbd(ctx, "export", "rbd/"+blockImage, blockExport); err != nil {
		t.Fatal(err)
	}
	blk, err := os.ReadFile(blockExport)
	if err != nil {
		t.Fatal(err)
	}
	bl := res.Lines("BLOCK ")
	if len(bl) != 1 || len(strings.Fields(bl[0])) != 2 {
		t.Fatalf("guest reported block %q", bl)
	}
	want := strings.Fields(bl[0])
	var n int
	fmt.Sscan(want[1], &n)
	if n <= 0 || n > len(blk) {
		t.Fatalf("BLOCK line %q; the export is %d bytes", bl[0], len(blk))
	}
	if bs := sha256.Sum256(blk[:n]); hex.EncodeToString(bs[:]) != want[0] {
		t.Errorf("the block image's first %d bytes in the export: sha256 %s; the guest wrote %s", n, hex.EncodeToString(bs[:])[:16], want[0][:16])
	} else {
		t.Logf("block volume: the export's first %d bytes are as the guest wrote them across the restart", n)
	}
	checkZeroedBlock(ctx, t, cluster, res, "rbd/"+blockImage, blk)
}

// checkXFSExport checks that xfs_repair -n finds nothing to repair in
// the xfs volume's export.
func checkXFSExport(ctx context.Context, t *testing.T, cluster *cephcluster.Cluster, xfsImage string) {
	t.Helper()
	xfsExport := filepath.Join(t.TempDir(), xfsImage+".img")
	if _, err := cluster.Rbd(ctx, "export", "rbd/"+xfsImage, xfsExport); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.CommandContext(ctx, "xfs_repair", "-n", "-f", xfsExport).CombinedOutput(); err != nil {
		t.Errorf("xfs_repair -n on the exported xfs image: %v\n%s", err, b)
	} else {
		t.Logf("xfs_repair -n on the xfs export: clean (%s)", lastLine(b))
	}
}
