package vmtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest/netns"
)

// TestNetworkVM boots a guest on a tap in a network namespace of the
// test: init brings eth0 up and reaches the namespace's address, and the
// guest sees no route anywhere else.
func TestNetworkVM(t *testing.T) {
	h := FindHost(t)
	ns := netns.New(t, netns.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := Run(ctx, t, h, Config{
		Command: []string{"/bin/sh", "-c", "ping -c 3 -i 0.2 " + ns.HostIP + " && ip route && ! ip route get 192.0.2.1"},
		Network: &Network{Netns: ns.Name, Tap: ns.Taps[0], GuestCIDR: ns.GuestCIDR(0), HostIP: ns.HostIP},
		Timeout: 3 * time.Minute,
	})
	if err != nil || res.ExitCode != 0 {
		c := ""
		if res != nil {
			c = res.Console
		}
		t.Fatalf("guest: %v; console:\n%s", err, c)
	}
	if res.NetUp == 0 || !strings.Contains(res.Console, "3 packets received") {
		t.Fatalf("no network in the guest; console:\n%s", res.Console)
	}
	t.Logf("boot to init %.2fs, network up %.2fs, whole run %.1fs", res.Boot.Seconds(), res.NetUp.Seconds(), res.Wall.Seconds())
}
