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
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
	"github.com/purerbd/purerbd/rados/radostest/netns"
)

// TestNodeRBDInVM runs the node service on a real RBD image: a Ceph
// cluster (one mon, one OSD) bound to an address inside a network
// namespace of the test, the guest on a tap in that namespace (nothing
// routed to or from the root namespace, which blackholes the subnet).
// The image is made with rbd(8) inside the namespace; the key reaches the
// guest in its initramfs. In the guest (nodeguest rbd-scenario), the
// plugin with the rbd opener stages ext4, publishes, writes, is SIGKILLed
// with writes in flight, restarts and takes the device over; the data is
// intact; the image is grown through package rbd and NodeExpandVolume
// grows the file system; unpublish and unstage free the device. Then, on
// the host, `rbd export` (inside the namespace) of the image must pass
// e2fsck -fn and hold the guest's files with the guest's checksums
// (debugfs cat), at the grown size; and the guest kernel's own rbd
// driver, mapping the image after the unstage, must read the same bytes
// as the export. A raw block volume on a second image is staged beside
// it across the SIGKILL and restart, read back with O_DIRECT and checked
// in its export; the guest prints the I/O stall across the restart and
// finds each device's NBD reconnection in its kernel log.
func TestNodeRBDInVM(t *testing.T) {
	host := vmtest.FindHost(t)
	var progs []string
	for p, pkg := range map[string]string{"/sbin/mkfs.ext4": "e2fsprogs", "/sbin/resize2fs": "e2fsprogs"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s not found: install the Debian package %s (%v)", p, pkg, err)
		}
		progs = append(progs, p)
	}
	for _, p := range []string{"e2fsck", "debugfs"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s not found: install the Debian package e2fsprogs (%v)", p, err)
		}
	}
	t0 := time.Now()
	guest := vmtest.BuildGo(t, "github.com/purerbd/purerbd/csi/internal/nodeguest")
	tBuild := time.Since(t0)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns := netns.New(t, netns.Options{})
	t1 := time.Now()
	cluster, err := cephcluster.Start(ctx, cephcluster.Options{
		Netns: ns.Name, BindAddr: ns.HostIP,
		// a SIGKILLed plugin's watch ends after 10 s, not 30: its lock is
		// broken sooner (clients confirm their watches every 5 s)
		Conf: map[string]string{"osd_client_watch_timeout": "10"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// registered after the namespace's: runs before it
	t.Cleanup(func() { cluster.Close() })
	tCluster := time.Since(t1)
	const image, blockImage = "csi-vol-fs", "csi-vol-block"
	for _, c := range [][2]string{{image, "64M"}, {blockImage, "32M"}} {
		if _, err := cluster.Rbd(ctx, "create", "--size", c[1], "--image-feature", "layering,exclusive-lock,object-map,fast-diff", "rbd/"+c[0]); err != nil {
			t.Fatal(err)
		}
	}
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
	var poolID int64
	for _, p := range pools {
		if p.Name == cluster.Pool {
			poolID = p.ID
		}
	}
	if poolID == 0 {
		t.Fatalf("pool %s not in %s", cluster.Pool, out)
	}
	// The key goes into the initramfs, never onto the kernel command line.
	keyring := filepath.Join(t.TempDir(), "keyring")
	if err := os.WriteFile(keyring, []byte("[client.admin]\n\tkey = "+cluster.AdminKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	var console strings.Builder
	res, err := vmtest.Run(ctx, t, host, vmtest.Config{
		Modules:  []string{"nbd", "ext4", "crc32c_generic", "rbd"},
		Programs: progs,
		Files: map[string]string{"/bin/nodeguest": guest, "/etc/ceph/keyring": keyring,
			"/etc/mke2fs.conf": "/etc/mke2fs.conf"},
		Command: []string{"/bin/nodeguest", "rbd-scenario", "-mon", cluster.MonAddrs[0], "-pool", cluster.Pool,
			"-pool-id", fmt.Sprint(poolID), "-image", image, "-block-image", blockImage, "-keyring", "/etc/ceph/keyring", "-krbd"},
		Network: &vmtest.Network{Netns: ns.Name, Tap: ns.Taps[0], GuestCIDR: ns.GuestCIDR(0), HostIP: ns.HostIP},
		Memory:  768,
		Timeout: 8 * time.Minute,
		Output:  &console,
	})
	if res == nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Console, cluster.AdminKey) {
		t.Error("the key appeared on the guest's console")
	}
	results := res.Lines("RESULT ")
	if err != nil || res.ExitCode != 0 || len(results) != 1 || !strings.HasPrefix(results[0], "ok ") {
		t.Fatalf("guest scenario failed (err %v, exit %d); console:\n%s\ncluster logs:%s", err, res.ExitCode, res.Console, cluster.LogTails(15))
	}

	// The host's view: rbd export inside the namespace, e2fsck, debugfs.
	t2 := time.Now()
	exported := filepath.Join(t.TempDir(), image+".img")
	if _, err := cluster.Rbd(ctx, "export", "rbd/"+image, exported); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(exported)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 128<<20 {
		t.Errorf("exported image is %d bytes, want 128 MiB (grown in the guest)", st.Size())
	}
	if b, err := exec.CommandContext(ctx, "e2fsck", "-fn", exported).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn on the exported image: %v\n%s", err, b)
	} else {
		t.Logf("e2fsck -fn: %s", lastLine(b))
	}
	files := res.Lines("FILE ")
	if len(files) != 2 {
		t.Fatalf("guest reported files %q", files)
	}
	for _, l := range files {
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
	// The raw block volume: its first 8 MiB as the guest wrote them
	// across the restart.
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
	tCheck := time.Since(t2)

	var r struct {
		Timings map[string]float64 `json:"timings_s"`
		Facts   map[string]any     `json:"facts"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(results[0], "ok ")), &r); err != nil {
		t.Fatalf("result line %q: %v", results[0], err)
	}
	t.Logf("build nodeguest %.1fs; cluster in %s at %s up in %.1fs (boot %.1fs)", tBuild.Seconds(), ns.Name, cluster.MonHost(), tCluster.Seconds(), cluster.Started.Seconds())
	t.Logf("VM: boot to init %.2fs, network up %.2fs, whole run %.1fs (wall); host export + e2fsck + debugfs %.1fs",
		res.Boot.Seconds(), res.NetUp.Seconds(), res.Wall.Seconds(), tCheck.Seconds())
	names := make([]string, 0, len(r.Timings))
	for n := range r.Timings {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("  %-70s %7.3fs", n, r.Timings[n])
	}
	t.Logf("  facts: %v", r.Facts)
	if os.Getenv("NODE_VM_CONSOLE") != "" {
		t.Logf("console:\n%s", res.Console)
	}
}

func lastLine(b []byte) string {
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	return l[len(l)-1]
}
