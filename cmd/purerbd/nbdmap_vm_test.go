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

// nbdMapScenario runs in the guest (busybox sh) with this binary as
// /bin/purerbd. The guest has no network, so it maps memory disks and
// files rather than RBD images: what it checks is the kernel side of the
// verbs (map with conns, device and cookie; list; unmap by path and by
// cookie; SIGTERM unmapping; release on exit and reattach by cookie; a
// map in a network namespace of its own names the namespace as what it
// lacks netlink or LINK_DEAD for).
const nbdMapScenario = `
set -u
P=/bin/purerbd
fail() { echo "FAIL: $*"; for f in /tmp/map*.err; do echo "== $f"; cat "$f"; done; exit 1; }
waitdev() { i=0; while [ ! -s "$1" ]; do i=$((i+1)); [ $i -gt 600 ] && return 1; sleep 0.1; done; cat "$1"; }
# map prints the device once the kernel has it
map() { out=$1; shift; $P nbd map "$@" >/tmp/$out.out 2>/tmp/$out.err & }

dd if=/dev/urandom of=/tmp/a bs=1M count=8 2>/dev/null

# 1: memory disk, two connections, a cookie; list; I/O; unmap by path
map map1 --memory 64M --conns 2 --cookie vm-cookie-1; pid=$!
dev=$(waitdev /tmp/map1.out) || fail "map 1 printed no device"
[ -b "$dev" ] || fail "$dev is not a block device"
$P nbd list >/tmp/list1 || fail "list"
cat /tmp/list1
grep -q "^$dev  *64 MiB  *2  *vm-cookie-1$" /tmp/list1 || fail "list lacks $dev"
$P nbd list --format json | grep -q '"cookie": "vm-cookie-1"' || fail "list --format json lacks the cookie"
dd if=/tmp/a of=$dev bs=1M conv=fsync 2>/dev/null || fail "write to $dev"
echo 3 >/proc/sys/vm/drop_caches
dd if=$dev of=/tmp/b bs=1M count=8 2>/dev/null || fail "read from $dev"
cmp /tmp/a /tmp/b || fail "data read back from $dev differs"
$P nbd unmap $dev || fail "unmap $dev"
wait $pid; rc=$?; [ $rc -eq 0 ] || fail "map 1 exited $rc after unmap"
echo "STEP map-list-io-unmap ok"

# 2: a file on a chosen device, unmapped by cookie; the file holds the data
dd if=/dev/zero of=/tmp/img bs=1M count=16 2>/dev/null
map map2 --file /tmp/img --device /dev/nbd5 --cookie vm-cookie-2; pid=$!
dev=$(waitdev /tmp/map2.out) || fail "map 2 printed no device"
[ "$dev" = /dev/nbd5 ] || fail "map 2 on $dev, asked for /dev/nbd5"
dd if=/tmp/a of=$dev bs=1M conv=fsync 2>/dev/null || fail "write to $dev"
$P nbd unmap --cookie vm-cookie-2 || fail "unmap by cookie"
wait $pid; rc=$?; [ $rc -eq 0 ] || fail "map 2 exited $rc"
dd if=/tmp/img of=/tmp/c bs=1M count=8 2>/dev/null
cmp /tmp/a /tmp/c || fail "the file lacks what was written to $dev"
$P nbd unmap --cookie vm-cookie-2 2>/dev/null && fail "second unmap by cookie succeeded"
echo "STEP file-device-cookie ok"

# 3: SIGTERM unmaps
map map3 --memory 8M --cookie vm-cookie-3; pid=$!
dev=$(waitdev /tmp/map3.out) || fail "map 3 printed no device"
kill -TERM $pid; wait $pid; rc=$?; [ $rc -eq 0 ] || fail "map 3 exited $rc on SIGTERM"
$P nbd list | grep -q vm-cookie-3 && fail "$dev still mapped after SIGTERM"
echo "STEP sigterm-unmaps ok"

# 4: --release-on-exit leaves the device for --reattach by cookie
map map4 --file /tmp/img --cookie vm-cookie-4 --release-on-exit; pid=$!
dev=$(waitdev /tmp/map4.out) || fail "map 4 printed no device"
kill -TERM $pid; wait $pid; rc=$?; [ $rc -eq 0 ] || fail "map 4 exited $rc on SIGTERM"
$P nbd list | grep -q "^$dev .*vm-cookie-4$" || fail "released $dev not listed"
map map5 --file /tmp/img --cookie vm-cookie-4 --reattach; pid=$!
dev2=$(waitdev /tmp/map5.out) || fail "reattach printed no device"
[ "$dev2" = "$dev" ] || fail "reattach took $dev2, released $dev"
echo 3 >/proc/sys/vm/drop_caches
dd if=$dev of=/tmp/d bs=1M count=8 2>/dev/null || fail "read after reattach"
cmp /tmp/a /tmp/d || fail "data after reattach differs"
$P nbd unmap $dev || fail "unmap after reattach"
wait $pid; rc=$?; [ $rc -eq 0 ] || fail "reattached map exited $rc"
echo "STEP release-reattach ok"

# 5: in a network namespace of its own, as a pod without hostNetwork runs:
# before Linux 6.4 the nbd netlink family is missing there (ioctls), and on
# every kernel LINK_DEAD is; either way the log names the namespace, and
# does not blame the kernel's age
unshare -n $P nbd map --memory 64M --cookie vm-cookie-6 >/tmp/map6.out 2>/tmp/map6.err & pid=$!
dev=$(waitdev /tmp/map6.out) || fail "map in a new network namespace printed no device"
grep -q "network namespace" /tmp/map6.err || fail "the log of a map in a new network namespace does not name the namespace"
grep -q "hostNetwork: true" /tmp/map6.err || fail "the log of a map in a new network namespace gives no remedy"
grep -q "Linux before 4.12" /tmp/map6.err && fail "a map in a new network namespace blames Linux 4.12"
echo "NETNS $(uname -r): $(grep -m1 'network namespace' /tmp/map6.err)"
kill -TERM $pid; wait $pid; rc=$?; [ $rc -eq 0 ] || fail "map in a new network namespace exited $rc on SIGTERM"
$P nbd list | grep -q "^$dev " && fail "$dev still mapped after SIGTERM"
echo "STEP netns-named ok"

[ -z "$($P nbd list)" ] || fail "devices left mapped"
echo "RESULT ok"
`

// TestNBDMapInVM runs `purerbd nbd map|list|unmap` against Debian's
// kernel in qemu (nbdMapScenario).
func TestNBDMapInVM(t *testing.T) {
	host := vmtest.FindHost(t)
	bin := vmtest.BuildGo(t, "github.com/purerbd/purerbd/cmd/purerbd")
	script := filepath.Join(t.TempDir(), "scenario.sh")
	if err := os.WriteFile(script, []byte(nbdMapScenario), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute+vmtest.StallRoom)
	defer cancel()
	var out strings.Builder
	res, err := vmtest.Run(ctx, t, host, vmtest.Config{
		Modules: []string{"nbd"},
		Files:   map[string]string{"/bin/purerbd": bin, "/bin/scenario.sh": script},
		Command: []string{"/bin/sh", "/bin/scenario.sh"},
		Timeout: 4 * time.Minute,
		Output:  &out,
	})
	if res == nil {
		t.Fatal(err)
	}
	if err != nil || res.ExitCode != 0 || len(res.Lines("RESULT ok")) != 1 {
		t.Fatalf("guest scenario failed (err %v, exit %d); console:\n%s", err, res.ExitCode, res.Console)
	}
	for _, l := range append(res.Lines("STEP "), res.Lines("NETNS ")...) {
		t.Log(l)
	}
	t.Logf("VM: boot to init %.2fs, whole run %.1fs (wall)", res.Boot.Seconds(), res.Wall.Seconds())
}
