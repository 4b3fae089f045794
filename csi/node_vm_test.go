package csi_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest"
)

// TestNodeInVM runs the node service against Debian's kernel in qemu, in
// one boot (internal/nodeguest is the scenario): NodeStage of an ext4
// volume (NBD attach, mkfs, mount), idempotent and conflicting repeats,
// NodePublish read-write and read-only, stats and health, SIGKILL of the
// plugin with writes in flight and a restart that takes the device over
// (writes resume, checksums match), online NodeExpandVolume with
// resize2fs, a graceful handover on SIGTERM, a restart without
// credentials or image, a cluster stall past the kernel's request
// timeout, a raw block volume and a lost state, an xfs volume grown with
// xfs_growfs, and NodeUnpublish and
// NodeUnstage until the device is free; then the volume is staged again
// read-only to check the data. Images are files in the guest. (csi-sanity's
// Node specs run against purerbd-csi on real RBD in TestNodeRBDInVM.)
func TestNodeInVM(t *testing.T) {
	host := vmtest.FindHost(t)
	var progs []string
	for p, pkg := range map[string]string{"/sbin/mkfs.ext4": "e2fsprogs", "/sbin/resize2fs": "e2fsprogs",
		"/sbin/mkfs.xfs": "xfsprogs", "/sbin/xfs_growfs": "xfsprogs"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s not found: install the Debian package %s (%v)", p, pkg, err)
		}
		progs = append(progs, p)
	}
	guest := vmtest.BuildGo(t, "github.com/purerbd/purerbd/csi/internal/nodeguest")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute+vmtest.StallRoom)
	defer cancel()
	var out strings.Builder
	res, err := vmtest.Run(ctx, t, host, vmtest.Config{
		Modules:  []string{"nbd", "ext4", "xfs", host.CRC32C()},
		Programs: progs,
		Files:    map[string]string{"/bin/nodeguest": guest, "/etc/mke2fs.conf": "/etc/mke2fs.conf"},
		Command:  []string{"/bin/nodeguest", "scenario"},
		Memory:   768,
		Timeout:  9 * time.Minute,
		Output:   &out,
	})
	if res == nil {
		t.Fatal(err)
	}
	sc, serr := res.Scenario()
	if err != nil || res.ExitCode != 0 || serr != nil {
		t.Fatalf("guest scenario failed (err %v, exit %d, %v); console:\n%s", err, res.ExitCode, serr, res.Console)
	}
	t.Logf("VM: boot to init %.2fs, whole run %.1fs (wall)", res.Boot.Seconds(), res.Wall.Seconds())
	sc.Log(t)
	if os.Getenv("NODE_VM_CONSOLE") != "" {
		t.Logf("console:\n%s", res.Console)
	}
}

// buildTestBinary compiles the tests of pkg (relative to this package)
// into a static binary for the guest.
func buildTestBinary(t *testing.T, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg)+".test")
	cmd := exec.Command("go", "test", "-c", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c %s: %v\n%s", pkg, err, b)
	}
	return out
}
