package bench

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQuickKernelVM runs the kernel-vm section in quick mode end to end:
// binaries built, a cluster in a network namespace, the VM booted, and
// every contender (purerbd and nbdkit on memory disks, purerbd and krbd on
// RBD images, purerbd's rbd package and librbd with no device, and memory
// disks through nbd.ko and ublk, beside krbd) measured, and the node plugin's RSS with 1 and 10 volumes
// staged. It checks the harness, not the figures (the guest is emulated).
func TestQuickKernelVM(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM under TCG and a Ceph cluster: about 5 minutes")
	}
	if tool := haveTools("go", "qemu-system-x86_64", "nbdkit", "ceph-mon", "ceph-osd", "rbd", "ip"); tool != "" {
		t.Fatalf("%s is not installed: run make deps (a test that needs a tool fails without it)", tool)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Root: "..", ReportDir: out, WorkDir: filepath.Join(out, "work"),
		Quick: true, Only: []string{SectionKernelVM}, Runtime: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.KernelVMs) != 1 {
		t.Fatalf("%d kernel-path sections, want 1", len(rep.KernelVMs))
	}
	k := rep.KernelVMs[0]
	if k.Skipped != "" {
		t.Fatalf("kernel-vm did not run: %+v", k)
	}
	for _, n := range k.Notes {
		t.Logf("note: %s", n)
	}
	var ids []string
	for _, sec := range k.Sections {
		ids = append(ids, sec.ID)
	}
	// rbd-ublk only on a kernel with ublk (PURERBD_KERNEL=trixie or sid)
	clients := " vm-rbd-client vm-rbd-librbd"
	got := strings.Join(ids, " ")
	ublk := got == "vm-memory vm-rbd vm-rbd-ublk"+clients+" vm-floor-nbd vm-floor-ublk"
	if got != "vm-memory vm-rbd"+clients+" vm-floor-nbd" && !ublk {
		t.Fatalf("I/O sections %q, want memory, rbd (and rbd-ublk where the kernel has ublk), the clients and the floors", got)
	}
	for _, sec := range k.Sections {
		for _, c := range sec.Cases {
			for _, who := range sec.Contenders {
				if s := c.spread(who); s.N != rep.Reps || !(s.Median > 0) {
					t.Errorf("%s %s %s: %d runs, median %v", sec.ID, c.Name, who, s.N, s.Median)
				}
			}
		}
	}
	if k.Node == nil || len(k.Node.StageS) != vmNodeVolumes || len(k.Node.UnstageS) != vmNodeVolumes {
		t.Fatalf("node record %+v", k.Node)
	}
	if k.rssAt(1) <= 0 || k.rssAt(vmNodeVolumes) < k.rssAt(1) {
		t.Errorf("node RSS with 1 volume %d, with %d %d", k.rssAt(1), vmNodeVolumes, k.rssAt(vmNodeVolumes))
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	wants := []string{"## Kernel path inside a VM (software-emulated)", "ratio purerbd/nbdkit",
		"ratio purerbd/krbd", "ratio librbd/krbd", "ratio nbdkit/krbd", "### What bounds the device paths", "| 10 staged | 10 |", "| node plugin RSS, 10 volumes attached (VM) | "}
	if ublk {
		wants = append(wants, "| case | ublk / krbd | nbd.ko / krbd | ublk / nbd.ko |")
	}
	for _, want := range wants {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
