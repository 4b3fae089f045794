package csi_test

import (
	"context"
	"encoding/json"
	"os"
	"sort"
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
// resize2fs, a graceful handover on SIGTERM, a raw block volume, and
// NodeUnpublish/NodeUnstage until the device is free; then the volume is
// staged again read-only to check the data. Images are files in the
// guest.
func TestNodeInVM(t *testing.T) {
	host := vmtest.FindHost(t)
	var progs []string
	for _, p := range []string{"/sbin/mkfs.ext4", "/sbin/resize2fs"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s not found: install the Debian package e2fsprogs (%v)", p, err)
		}
		progs = append(progs, p)
	}
	guest := vmtest.BuildGo(t, "github.com/purerbd/purerbd/csi/internal/nodeguest")

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var out strings.Builder
	res, err := vmtest.Run(ctx, t, host, vmtest.Config{
		Modules:  []string{"nbd", "ext4", "crc32c_generic"},
		Programs: progs,
		Files:    map[string]string{"/bin/nodeguest": guest, "/etc/mke2fs.conf": "/etc/mke2fs.conf"},
		Command:  []string{"/bin/nodeguest", "scenario"},
		Memory:   768,
		Timeout:  5 * time.Minute,
		Output:   &out,
	})
	if res == nil {
		t.Fatal(err)
	}
	results := res.Lines("RESULT ")
	if err != nil || res.ExitCode != 0 || len(results) != 1 || !strings.HasPrefix(results[0], "ok ") {
		t.Fatalf("guest scenario failed (err %v, exit %d); console:\n%s", err, res.ExitCode, res.Console)
	}
	var r struct {
		Timings map[string]float64 `json:"timings_s"`
		Facts   map[string]any     `json:"facts"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(results[0], "ok ")), &r); err != nil {
		t.Fatalf("result line %q: %v", results[0], err)
	}
	t.Logf("VM: boot to init %.2fs, whole run %.1fs (wall)", res.Boot.Seconds(), res.Wall.Seconds())
	names := make([]string, 0, len(r.Timings))
	for n := range r.Timings {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("  %-55s %7.3fs", n, r.Timings[n])
	}
	t.Logf("  facts: %v", r.Facts)
	if os.Getenv("NODE_VM_CONSOLE") != "" {
		t.Logf("console:\n%s", res.Console)
	}
}
