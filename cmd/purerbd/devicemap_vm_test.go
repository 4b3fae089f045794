package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest"
)

// deviceMapUblkScenario runs in the guest (busybox sh) with this binary
// as /bin/purerbd, on a kernel with ublk: map -t ublk of a memory disk
// (I/O, unmap from another process), of a file killed with SIGKILL under
// a writer and taken over with --recover (the writer sees no error, the
// data is all there), SIGTERM unmapping, and -t auto choosing ublk.
const deviceMapUblkScenario = `
set -u
P=/bin/purerbd
fail() { echo "FAIL: $*"; for f in /tmp/map*.err /tmp/dd*.err; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done; exit 1; }
waitdev() { i=0; while [ ! -s "$1" ]; do i=$((i+1)); [ $i -gt 600 ] && return 1; sleep 0.1; done; cat "$1"; }
map() { out=$1; shift; $P device map "$@" >/tmp/$out.out 2>/tmp/$out.err & }

dd if=/dev/urandom of=/tmp/a bs=1M count=16 2>/dev/null

# 1: memory disk, two queues; I/O; unmap from another process
map map1 -t ublk --memory 64M --queues 2; pid=$!
dev=$(waitdev /tmp/map1.out) || fail "map 1 printed no device"
case $dev in /dev/ublkb*) ;; *) fail "map 1 made $dev";; esac
[ -b "$dev" ] || fail "$dev is not a block device"
dd if=/tmp/a of=$dev bs=1M oflag=direct 2>/dev/null || fail "write to $dev"
dd if=$dev of=/tmp/b bs=1M count=16 iflag=direct 2>/dev/null || fail "read from $dev"
cmp /tmp/a /tmp/b || fail "data read back from $dev differs"
$P device unmap $dev || fail "unmap $dev"
wait $pid; rc=$?; [ $rc -eq 0 ] || fail "map 1 exited $rc after unmap"
[ -e $dev ] && fail "$dev still there after unmap"
echo "STEP ublk-map-io-unmap ok"

# 2: a file; SIGKILL of its server under a writer; --recover by a new one
dd if=/dev/zero of=/tmp/img bs=1M count=32 2>/dev/null
map map2 -t ublk --file /tmp/img; pid=$!
dev=$(waitdev /tmp/map2.out) || fail "map 2 printed no device"
dd if=/dev/urandom of=/tmp/big bs=1M count=32 2>/dev/null
dd if=/tmp/big of=$dev bs=16k oflag=direct 2>/tmp/dd.err & dd=$!
sleep 1
kill -0 $dd 2>/dev/null || fail "the writer finished before the kill"
kill -KILL $pid; wait $pid
map map3 -t ublk --file /tmp/img --recover $dev; pid=$!
dev2=$(waitdev /tmp/map3.out) || fail "recover printed no device"
[ "$dev2" = "$dev" ] || fail "recover took $dev2, the dead server had $dev"
wait $dd; rc=$?; [ $rc -eq 0 ] || fail "the writer failed across the kill ($rc)"
dd if=$dev of=/tmp/c bs=1M count=32 iflag=direct 2>/dev/null || fail "read after recovery"
cmp /tmp/big /tmp/c || fail "data after recovery differs"
echo "STEP ublk-sigkill-recover ok"

# 3: SIGTERM unmaps; the file holds the data
kill -TERM $pid; wait $pid; rc=$?; [ $rc -eq 0 ] || fail "map 3 exited $rc on SIGTERM"
[ -e $dev ] && fail "$dev still there after SIGTERM"
cmp /tmp/big /tmp/img || fail "the file lacks what was written"
echo "STEP ublk-sigterm-unmaps ok"

# 4: -t auto takes ublk here
map map4 --memory 8M; pid=$!
dev=$(waitdev /tmp/map4.out) || fail "map 4 printed no device"
case $dev in /dev/ublkb*) ;; *) fail "-t auto made $dev on a kernel with ublk";; esac
kill -TERM $pid; wait $pid; rc=$?; [ $rc -eq 0 ] || fail "map 4 exited $rc"
echo "STEP auto-is-ublk ok"
echo "RESULT ok"
`

// deviceMapNoUblkScenario checks, on a kernel without ublk, that -t ublk
// fails saying so and -t auto falls back to nbd.
const deviceMapNoUblkScenario = `
set -u
P=/bin/purerbd
fail() { echo "FAIL: $*"; cat /tmp/*.err; exit 1; }
waitdev() { i=0; while [ ! -s "$1" ]; do i=$((i+1)); [ $i -gt 600 ] && return 1; sleep 0.1; done; cat "$1"; }
$P device map -t ublk --memory 8M >/tmp/u.out 2>/tmp/u.err && fail "-t ublk mapped without ublk"
grep -q "ublk unsupported by this kernel" /tmp/u.err || fail "-t ublk does not say ublk is missing"
echo "NOUBLK $(uname -r): $(cat /tmp/u.err)"
$P device map --memory 8M >/tmp/n.out 2>/tmp/n.err & pid=$!
dev=$(waitdev /tmp/n.out) || fail "-t auto printed no device"
case $dev in /dev/nbd*) ;; *) fail "-t auto made $dev without ublk";; esac
kill -TERM $pid; wait $pid; rc=$?; [ $rc -eq 0 ] || fail "map exited $rc"
echo "STEP auto-falls-back-to-nbd ok"
echo "RESULT ok"
`

// TestDeviceMapInVM runs `purerbd device map|unmap` against Debian's
// kernel in qemu: the ublk scenario where the kernel has ublk (a kernel
// named by PURERBD_KERNEL must), the fallback to nbd where it has not.
func TestDeviceMapInVM(t *testing.T) {
	host := vmtest.FindHost(t)
	cfg := host.KernelConfig()
	if cfg == nil {
		t.Fatalf("no build configuration found for %s", host.Kernel)
	}
	scenario, modules := deviceMapUblkScenario, []string{"ublk_drv"}
	if c := cfg["CONFIG_BLK_DEV_UBLK"]; c != "m" && c != "y" {
		if suite, _ := vmtest.KernelSuite(); suite != "" {
			t.Fatalf("%s=%s: kernel %s has no ublk", vmtest.KernelEnv, suite, host.Release)
		}
		scenario, modules = deviceMapNoUblkScenario, []string{"nbd"}
	}
	bin := vmtest.BuildGo(t, "github.com/purerbd/purerbd/cmd/purerbd")
	script := filepath.Join(t.TempDir(), "scenario.sh")
	if err := os.WriteFile(script, []byte(scenario), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute+vmtest.StallRoom)
	defer cancel()
	var out strings.Builder
	res, err := vmtest.Run(ctx, t, host, vmtest.Config{
		Modules: append(modules, "nbd"),
		Files:   map[string]string{"/bin/purerbd": bin, "/bin/scenario.sh": script},
		Command: []string{"/bin/sh", "/bin/scenario.sh"},
		Memory:  1024,
		Timeout: 5 * time.Minute,
		Output:  &out,
	})
	if res == nil {
		t.Fatal(err)
	}
	if err != nil || res.ExitCode != 0 || len(res.Lines("RESULT ok")) != 1 {
		t.Fatalf("guest scenario failed (err %v, exit %d); console:\n%s", err, res.ExitCode, res.Console)
	}
	for _, l := range append(res.Lines("STEP "), res.Lines("NOUBLK ")...) {
		t.Log(l)
	}
	t.Logf("VM: boot to init %.2fs, whole run %.1fs (wall), kernel %s (%s)", res.Boot.Seconds(), res.Wall.Seconds(), host.Release, host.Suite)
}
