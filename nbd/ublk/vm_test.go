package ublk_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest"
)

const guestPkg = "github.com/purerbd/purerbd/nbd/ublk/internal/ublkguest"

// TestUblkInVM runs internal/ublkguest against a Debian kernel in qemu,
// in one boot: ublk_drv loaded (compressed) through LoadModule, a device
// over an in-process Memory backend with two queues, O_DIRECT writes and
// reads checked against the backend, throughput measured beside nbd.ko
// on the same kind of backend (the ratio is logged, not asserted), ext4
// made, mounted and read back after a remount, STOP_DEV and DEL_DEV;
// then a file backend served by a child process, SIGKILLed five times
// under four O_DIRECT writers and replaced each time by a new process
// through user recovery: no write may fail, every block must hold its
// last write, and the longest write stall of each kill is logged. On a kernel built without ublk (Debian
// 12's 6.1, the default) the guest must report ublk as absent instead;
// a kernel picked with PURERBD_KERNEL must have it.
func TestUblkInVM(t *testing.T) {
	host := vmtest.FindHost(t)
	cfg := host.KernelConfig()
	if cfg == nil {
		t.Fatalf("no build configuration found for %s", host.Kernel)
	}
	guest := vmtest.BuildGo(t, guestPkg)
	has := cfg["CONFIG_BLK_DEV_UBLK"] == "m" || cfg["CONFIG_BLK_DEV_UBLK"] == "y"
	if !has {
		if suite, _ := vmtest.KernelSuite(); suite != "" {
			t.Fatalf("%s=%s: kernel %s has no ublk (CONFIG_BLK_DEV_UBLK=%q)", vmtest.KernelEnv, suite, host.Release, cfg["CONFIG_BLK_DEV_UBLK"])
		}
		sc := vmtest.RunScenario(t, host, vmtest.Config{
			Files:   map[string]string{"/bin/ublkguest": guest},
			Command: []string{"/bin/ublkguest", "absent"},
			Timeout: 3 * time.Minute,
		})
		t.Logf("kernel %s (%s) has no ublk, and the guest reports it: %v", host.Release, host.Suite, sc.Facts["load_module"])
		return
	}
	mke2fs := "/sbin/mke2fs"
	if _, err := os.Stat(mke2fs); err != nil {
		t.Fatalf("%s not found: install the Debian package e2fsprogs (%v)", mke2fs, err)
	}
	sc := vmtest.RunScenario(t, host, vmtest.Config{
		Modules:  []string{"ublk_drv", "nbd", "ext4", host.CRC32C()},
		Programs: []string{mke2fs},
		Files:    map[string]string{"/bin/ublkguest": guest, "/etc/mke2fs.conf": "/etc/mke2fs.conf"},
		Command:  []string{"/bin/ublkguest", "scenario"},
		Memory:   1024,
		CPUs:     2,
		Timeout:  8 * time.Minute,
	})
	t.Logf("kernel %s (%s): ublk %v, nbd.ko %v; ublk/nbd ratios %v", host.Release, host.Suite,
		sc.Facts["ublk"], sc.Facts["nbd"], sc.Facts["ratio_ublk_over_nbd"])
	t.Logf("SIGKILL of the server under 4 O_DIRECT writers, %v times: no write failed; recovered in %v s; longest write stall per kill %v s (median %v, max %v)",
		sc.Facts["kill_cycles"], sc.Facts["recovery_s"], sc.Facts["write_stall_s"], sc.Facts["write_stall_median_s"], sc.Facts["write_stall_max_s"])
	if f, _ := sc.Facts["module_file"].(string); !strings.HasPrefix(f, "ublk_drv.ko") {
		t.Errorf("the guest loaded %q, want ublk_drv.ko*", f)
	}
}
