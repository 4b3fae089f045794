package csi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
	"github.com/purerbd/purerbd/rados/radostest/netns"
)

// ublkKernelSuite is the Debian suite whose kernel the ublk node test
// boots unless PURERBD_KERNEL names another: one whose ublk resizes live
// devices (Linux 6.16 and later), where the plugin at its defaults
// serves volumes through ublk.
const ublkKernelSuite = "sid"

// TestNodeUblkInVM runs the node scenario of TestNodeRBDInVM on a
// kernel with ublk (sid's, fetched once into the cache), the plugin at
// its default settings choosing ublk by itself (--device-type auto):
// ext4, xfs and a raw block volume staged on /dev/ublkbN, the binary
// SIGKILLed 20 times under writers on all three and restarted at once
// (each restart takes the devices over through ublk's user recovery;
// the stall distribution is reported), every byte verified in the
// guest, each volume on the same device throughout, the ext4 volume
// grown online (UPDATE_SIZE), unpublish and unstage removing the
// devices; then on the host, `rbd export` of each image: e2fsck and the
// guest's files, the block volume's bytes and zeroed objects,
// xfs_repair. make vm-kernels runs it (make unit leaves it out: it
// boots another kernel).
func TestNodeUblkInVM(t *testing.T) {
	if s, _ := vmtest.KernelSuite(); s == "" {
		t.Setenv(vmtest.KernelEnv, ublkKernelSuite)
	}
	host := vmtest.FindHost(t)
	if c := host.KernelConfig()["CONFIG_BLK_DEV_UBLK"]; c != "m" && c != "y" {
		t.Fatalf("kernel %s (%s) has no ublk (CONFIG_BLK_DEV_UBLK=%q)", host.Release, host.Suite, c)
	}
	progs := rbdScenarioPrograms(t)
	guest := vmtest.BuildGo(t, "github.com/purerbd/purerbd/csi/internal/nodeguest")
	plugin := vmtest.BuildGo(t, "github.com/purerbd/purerbd/cmd/purerbd-csi")

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute+vmtest.StallRoom)
	defer cancel()
	ns := netns.New(t, netns.Options{})
	// Ceph's default settings where they bound a restart, as the
	// plugin runs at its own.
	cluster, err := cephcluster.Start(ctx, cephcluster.Options{Netns: ns.Name, BindAddr: ns.HostIP, Conf: restartCephDefaults})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Close() })
	const image, blockImage, xfsImage = "csi-vol-fs", "csi-vol-block", "csi-vol-xfs"
	for _, c := range [][2]string{{image, "256M"}, {blockImage, "1G"}, {xfsImage, "1G"}} {
		if _, err := cluster.Rbd(ctx, "create", "--size", c[1], "--image-feature", "layering,exclusive-lock,object-map,fast-diff", "rbd/"+c[0]); err != nil {
			t.Fatal(err)
		}
	}
	poolID := poolIDOf(ctx, t, cluster)
	files := rbdGuestFiles(t, cluster, "vm-cluster")
	files["/bin/nodeguest"], files["/bin/purerbd-csi"] = guest, plugin
	scenario := fmt.Sprintf("/bin/nodeguest rbd-scenario -device ublk -mon %s -pool %s -pool-id %d -image %s -block-image %s -xfs-image %s -keyring /etc/ceph/keyring -kills %d",
		cluster.MonAddrs[0], cluster.Pool, poolID, image, blockImage, xfsImage, restartKills)
	var console strings.Builder
	res, err := vmtest.Run(ctx, t, host, vmtest.Config{
		Modules:  []string{"ublk_drv", "nbd", "ext4", "xfs", host.CRC32C()},
		Programs: progs,
		Files:    files,
		Command:  []string{"/bin/sh", "-c", scenario},
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
	if err != nil || serr != nil || res.ExitCode != 0 {
		t.Fatalf("guest scenario failed (err %v, exit %d, %v); console:\n%s\ncluster logs:%s", err, res.ExitCode, serr, res.Console, cluster.LogTails(15))
	}
	checkExt4Export(ctx, t, cluster, res, image)
	checkBlockExport(ctx, t, cluster, res, blockImage)
	checkXFSExport(ctx, t, cluster, xfsImage)
	t.Logf("VM: kernel %s (%s), boot to init %.2fs, whole run %.1fs (wall)", host.Release, host.Suite, res.Boot.Seconds(), res.Wall.Seconds())
	sc.Log(t)
}
