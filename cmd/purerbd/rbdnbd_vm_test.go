package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
	"github.com/purerbd/purerbd/rados/radostest/netns"
)

// rbdNBDScenario runs in the guest (busybox sh) with this binary as
// /bin/purerbd, reached as /bin/rbd-nbd (P), beside Ceph's own rbd-nbd
// (C, /usr/bin/rbd-nbd with its libraries), both on the host's cluster
// through /etc/ceph/ceph.conf. Each step runs a command line as scripts
// type it and checks the result, and where both tools have the verb,
// that they agree (exit codes, list-mapped's output). Ceph 16.2's
// rbd-nbd uses netlink (cookies, attach) only with --try-netlink;
// purerbd always does where the kernel has it.
const rbdNBDScenario = `
set -u
ln -s /bin/purerbd /bin/rbd-nbd
P=/bin/rbd-nbd
C=/usr/bin/rbd-nbd
mkdir -p /var/run/ceph /var/log/ceph
fail() { echo "FAIL: $*"; for f in /tmp/*.err; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done; exit 1; }
# list-mapped of both tools, ids left out: Ceph's names the thread that
# started a purerbd device, purerbd its process
same_lists() {
	$P list-mapped --format json >/tmp/lp.json 2>/tmp/lp.err || fail "purerbd list-mapped --format json"
	$C list-mapped --format json >/tmp/lc.json 2>/tmp/lc.err || fail "ceph list-mapped --format json"
	sed 's/"id":[0-9]*,//g' /tmp/lp.json >/tmp/lp.n; sed 's/"id":[0-9]*,//g' /tmp/lc.json >/tmp/lc.n
	cmp -s /tmp/lp.n /tmp/lc.n || fail "list-mapped --format json differs: purerbd $(od -c /tmp/lp.json | tail -3) ceph $(od -c /tmp/lc.json | tail -3)"
	$P list-mapped --format json --pretty-format | grep -v '"id"' >/tmp/lp.pretty || fail "purerbd list-mapped --pretty-format"
	$C list-mapped --format json --pretty-format | grep -v '"id"' >/tmp/lc.pretty || fail "ceph list-mapped --pretty-format"
	cmp -s /tmp/lp.pretty /tmp/lc.pretty || fail "list-mapped --pretty-format differs: purerbd $(od -c /tmp/lp.pretty | tail -5) ceph $(od -c /tmp/lc.pretty | tail -5)"
	$P list-mapped | awk '{$1=""; print}' >/tmp/tp || fail "purerbd list-mapped"
	$C list-mapped | awk '{$1=""; print}' >/tmp/tc || fail "ceph list-mapped"
	cmp -s /tmp/tp /tmp/tc || fail "list-mapped differs: purerbd:
$(cat /tmp/tp)
ceph:
$(cat /tmp/tc)"
	echo "LIST $1 $(cat /tmp/lp.json)"
}
dd if=/dev/urandom of=/tmp/a bs=1M count=8 2>/dev/null

# 1: map goes to the background and prints the device, as rbd-nbd does
d1=$($P map rbd/img1 2>/tmp/map1.err) || fail "purerbd map"
[ -b "$d1" ] || fail "map printed $d1"
dd if=/tmp/a of=$d1 bs=1M oflag=direct 2>/dev/null || fail "write to $d1"
echo "STEP map-background ok"

# 2: --show-cookie and --cookie, both tools
out=$($C map --try-netlink --show-cookie --cookie ceph-c2 rbd/img2 2>/tmp/map2.err) || fail "ceph map"
d2=${out%% *}; [ "$out" = "$d2 ceph-c2" ] || fail "ceph map --show-cookie printed '$out'"
out=$($P map --show-cookie --cookie pure-c3 --read-only rbd/img3 2>/tmp/map3.err) || fail "purerbd map --show-cookie"
d3=${out%% *}; [ "$out" = "$d3 pure-c3" ] || fail "purerbd map --show-cookie printed '$out'"
dd if=/dev/zero of=$d3 bs=4k count=1 oflag=direct 2>/dev/null && fail "wrote to the read-only $d3"
echo "STEP show-cookie ok"

# 3: each tool lists the other's devices as its own
same_lists three
grep -q '"device":"'$d2'","cookie":"ceph-c2"' /tmp/lp.json || fail "purerbd does not list ceph's $d2"
grep -q '"image":"img1","snap":"","device":"'$d1'"' /tmp/lc.json || fail "ceph does not list purerbd's $d1"
echo "STEP list-mapped ok"

# 4: the data, read back through the other tool
echo 3 >/proc/sys/vm/drop_caches
$C unmap $d1 2>/tmp/unmap1.err || fail "ceph unmap of purerbd's $d1"
i=0; while [ -e /sys/block/${d1#/dev/}/pid ]; do i=$((i+1)); [ $i -gt 100 ] && fail "$d1 still mapped"; sleep 0.1; done
d1=$($C map --try-netlink rbd/img1 2>/tmp/map1c.err) || fail "ceph map img1"
dd if=$d1 of=/tmp/b bs=1M count=8 iflag=direct 2>/dev/null || fail "read $d1"
cmp /tmp/a /tmp/b || fail "ceph's rbd-nbd reads other bytes than purerbd's wrote"
echo "STEP interop-data ok"

# 5: unmap by image spec, across tools, and what each says of an image not mapped
$P unmap rbd/img1 2>/tmp/unmap1p.err || fail "purerbd unmap of ceph's rbd/img1"
$P unmap rbd/img2 2>/tmp/unmap2.err || fail "purerbd unmap rbd/img2"
$C unmap rbd/img3 2>/tmp/unmap3.err || fail "ceph unmap of purerbd's rbd/img3"
$P unmap rbd/img2 2>/tmp/nm.p; p=$?
$C unmap rbd/img2 2>/tmp/nm.c; c=$?
[ $p = 1 ] && [ $c = 1 ] || fail "unmap of an image not mapped: purerbd $p, ceph $c"
grep -q "rbd/img2 is not mapped" /tmp/nm.p || fail "purerbd: $(cat /tmp/nm.p)"
grep -q "rbd/img2 is not mapped" /tmp/nm.c || fail "ceph: $(cat /tmp/nm.c)"
same_lists none
[ "$(cat /tmp/lp.json)" = "[]" ] || fail "devices left: $(cat /tmp/lp.json)"
echo "STEP unmap-spec ok"

# 6: detach leaves the device, attach serves it again, data kept; then
# the same across tools: ceph's server detached, purerbd attaches
d4=$($P map --cookie pure-c4 rbd/img4 2>/tmp/map4.err) || fail "map img4"
dd if=/tmp/a of=$d4 bs=1M oflag=direct 2>/dev/null || fail "write $d4"
$P detach rbd/img4 2>/tmp/detach4.err || fail "detach img4"
[ -e /sys/block/${d4#/dev/}/pid ] || fail "$d4 gone after detach"
$P attach --device $d4 --cookie wrong rbd/img4 2>/tmp/att.err && fail "attach with the wrong cookie"
grep -q "cookie mismatch" /tmp/att.err || fail "attach with the wrong cookie: $(cat /tmp/att.err)"
out=$($P attach --device $d4 --cookie pure-c4 rbd/img4 2>/tmp/attach4.err) || fail "attach img4"
[ "$out" = "$d4" ] || fail "attach printed '$out'"
$P attach --device $d4 --cookie pure-c4 rbd/img4 2>/tmp/att2.err && fail "second attach of a served device"
grep -q "has process" /tmp/att2.err || fail "second attach: $(cat /tmp/att2.err)"
echo 3 >/proc/sys/vm/drop_caches
dd if=$d4 of=/tmp/c bs=1M count=8 iflag=direct 2>/dev/null || fail "read $d4 after attach"
cmp /tmp/a /tmp/c || fail "data after detach and attach differs"
same_lists attached
$P unmap $d4 2>/tmp/unmap4.err || fail "unmap $d4"
d5=$($C map --try-netlink --cookie ceph-c5 rbd/img5 2>/tmp/map5.err) || fail "ceph map img5"
dd if=/tmp/a of=$d5 bs=1M oflag=direct 2>/dev/null || fail "write $d5"
$C detach $d5 2>/tmp/detach5.err || fail "ceph detach $d5"
$P attach --device $d5 --cookie ceph-c5 rbd/img5 >/dev/null 2>/tmp/attach5.err || fail "purerbd attach to ceph's $d5"
echo 3 >/proc/sys/vm/drop_caches
dd if=$d5 of=/tmp/d bs=1M count=8 iflag=direct 2>/dev/null || fail "read $d5"
cmp /tmp/a /tmp/d || fail "purerbd attached to ceph's device reads other bytes"
$C unmap rbd/img5 2>/tmp/unmap5.err || fail "ceph unmap rbd/img5"
echo "STEP detach-attach ok"

# 7: foreground map, SIGTERM leaves the device for attach (rbd-nbd's
# SIGTERM), unmap of a device with no server still disconnects it
$P map -f rbd/img4 >/tmp/fg.out 2>/tmp/fg.err & pid=$!
i=0; while [ ! -s /tmp/fg.out ]; do i=$((i+1)); [ $i -gt 300 ] && fail "map -f printed nothing"; sleep 0.1; done
d6=$(cat /tmp/fg.out)
kill -TERM $pid; wait $pid; rc=$?; [ $rc = 0 ] || fail "map -f exited $rc on SIGTERM"
[ -e /sys/block/${d6#/dev/}/pid ] || fail "$d6 gone after SIGTERM"
$P unmap $d6 2>/tmp/unmap6.err || fail "unmap of $d6 without a server"
[ "$($P list-mapped --format json)" = "[]" ] || fail "devices left at the end"
echo "STEP foreground-sigterm ok"

# 8: rbd device -t nbd (and rbd map, showmapped, unmap), as rbd runs
# rbd-nbd; krbd, rbd's default, refused with the remedy
ln -s /bin/purerbd /bin/rbd
R=/bin/rbd
$R map rbd/img1 2>/tmp/krbd.err && fail "rbd map without -t nbd (krbd) succeeded"
grep -q "give -t nbd" /tmp/krbd.err || fail "rbd map, krbd: $(cat /tmp/krbd.err)"
out=$($R device map -t nbd -o try-netlink,reattach-timeout=20 --show-cookie --cookie rbd-c7 img1 2>/tmp/map7.err) || fail "rbd device map"
d7=${out%% *}; [ "$out" = "$d7 rbd-c7" ] || fail "rbd device map --show-cookie printed '$out'"
d8=$($R map -t nbd -p rbd --read-only img2 2>/tmp/map8.err) || fail "rbd map -t nbd"
# (Ceph's rbd-nbd lists only processes named rbd-nbd: Ceph's rbd device
# map runs one, purerbd's serves in a process of its own name)
$P list-mapped --format json >/tmp/lp.json || fail "purerbd list-mapped"
$R device list -t nbd --format json >/tmp/rl.json || fail "rbd device list"
cmp -s /tmp/rl.json /tmp/lp.json || fail "rbd device list differs from list-mapped: $(cat /tmp/rl.json)"
$R showmapped -t nbd >/tmp/rs || fail "rbd showmapped"
$P list-mapped | cmp -s - /tmp/rs || fail "rbd showmapped differs from list-mapped"
grep -q '"image":"img2","snap":"","device":"'$d8'"' /tmp/rl.json || fail "rbd device list lacks $d8"
dd if=$d7 of=/tmp/e bs=1M count=8 iflag=direct 2>/dev/null || fail "read $d7"
cmp /tmp/a /tmp/e || fail "rbd device map of img1 reads other bytes"
$R device unmap -t nbd img1 2>/tmp/unmap7.err || fail "rbd device unmap img1"
$R unmap -t nbd $d8 2>/tmp/unmap8.err || fail "rbd unmap $d8"
[ "$($P list-mapped --format json)" = "[]" ] || fail "devices left after rbd device unmap"
echo "STEP rbd-device ok"
echo "RESULT ok"
`

// TestRBDNBDInVM runs the rbd-nbd command lines of rbdNBDScenario in a
// guest on Debian's kernel, against a cluster in a network namespace,
// with Ceph's rbd-nbd beside purerbd's.
func TestRBDNBDInVM(t *testing.T) {
	host := vmtest.FindHost(t)
	cephNBD, err := exec.LookPath("rbd-nbd")
	if err != nil {
		t.Fatalf("Ceph's rbd-nbd not found: install the Debian package rbd-nbd (%v)", err)
	}
	bin := vmtest.BuildGo(t, "github.com/purerbd/purerbd/cmd/purerbd")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute+vmtest.StallRoom)
	defer cancel()
	ns := netns.New(t, netns.Options{})
	cluster, err := cephcluster.Start(ctx, cephcluster.Options{Netns: ns.Name, BindAddr: ns.HostIP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Close() })
	for i := 1; i <= 5; i++ {
		name := "rbd/img" + string(rune('0'+i))
		if _, err := cluster.Rbd(ctx, "create", "--size", "64M", name); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	files := map[string]string{"/bin/purerbd": bin}
	for name, c := range map[string]string{
		"/etc/ceph/ceph.conf": "[global]\n\tmon_host = " + cluster.MonHost() + "\n\tkeyring = /etc/ceph/keyring\n",
		"/etc/ceph/keyring":   "[client.admin]\n\tkey = " + cluster.AdminKey + "\n",
		"/bin/scenario.sh":    rbdNBDScenario,
	} {
		p := filepath.Join(dir, filepath.Base(name))
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
		files[name] = p
	}
	var out strings.Builder
	res, err := vmtest.Run(ctx, t, host, vmtest.Config{
		Modules:  []string{"nbd"},
		Programs: []string{cephNBD},
		Files:    files,
		Command:  []string{"/bin/sh", "/bin/scenario.sh"},
		Network:  &vmtest.Network{Netns: ns.Name, Tap: ns.Taps[0], GuestCIDR: ns.GuestCIDR(0), HostIP: ns.HostIP},
		Memory:   1024,
		Timeout:  8 * time.Minute,
		Output:   &out,
	})
	if res == nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Console, cluster.AdminKey) {
		t.Error("the key appeared on the guest's console")
	}
	for _, l := range res.Lines("LIST ") {
		t.Logf("list-mapped %s", l)
	}
	if err != nil || res.ExitCode != 0 || !strings.Contains(res.Console, "RESULT ok") {
		t.Fatalf("scenario failed (err %v, exit %d); console:\n%s", err, res.ExitCode, res.Console)
	}
	for _, step := range []string{"map-background", "show-cookie", "list-mapped", "interop-data", "unmap-spec", "detach-attach", "foreground-sigterm", "rbd-device"} {
		if !strings.Contains(res.Console, "STEP "+step+" ok") {
			t.Errorf("step %s did not pass", step)
		}
	}
}
