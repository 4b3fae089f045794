package cephcluster

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest/netns"
)

// TestStartInNetns boots a cluster bound to an address inside a network
// namespace of the test: the daemons run in it, the tools reach them
// from in there, and nothing listens in the root namespace.
func TestStartInNetns(t *testing.T) {
	ns := netns.New(t, netns.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Netns: ns.Name, BindAddr: ns.HostIP})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Logf("cluster in %s at %s up in %v", ns.Name, c.MonHost(), c.Started.Round(time.Millisecond))
	if !strings.HasPrefix(c.MonAddrs[0], ns.HostIP+":") {
		t.Fatalf("mon address %s, want one on %s", c.MonAddrs[0], ns.HostIP)
	}
	conf, err := os.ReadFile(c.Conf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), "public addr = "+ns.HostIP+"\n") {
		t.Fatalf("ceph.conf:\n%s", conf)
	}
	want, err := os.Stat("/run/netns/" + ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range c.Daemons() {
		got, err := os.Stat("/proc/" + itoa(c.PID(d)) + "/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		if got.Sys().(*syscall.Stat_t).Ino != want.Sys().(*syscall.Stat_t).Ino {
			t.Fatalf("%s (pid %d) is not in the namespace", d, c.PID(d))
		}
	}
	if _, err := c.Rbd(ctx, "create", "--size", "16M", "rbd/img"); err != nil {
		t.Fatal(err)
	}
	out, err := c.Rbd(ctx, "ls", "rbd")
	if err != nil || strings.TrimSpace(string(out)) != "img" {
		t.Fatalf("rbd ls: %q %v", out, err)
	}
	out, err = c.Ceph(ctx, "osd", "dump")
	if err != nil || !strings.Contains(string(out), ns.HostIP+":") {
		t.Fatalf("osd dump lacks %s: %v\n%s", ns.HostIP, err, out)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if pids, _ := ns.PIDs(ctx); len(pids) != 0 {
		t.Fatalf("processes left in the namespace: %v", pids)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
