package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
)

// runDemo boots the embedded default cluster (one mon, one OSD, an rbd
// pool on 127.0.0.1), shows how to reach it and waits for Ctrl-C, then
// stops every daemon it started.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mons := fs.Int("mons", 1, "number of monitors")
	osds := fs.Int("osds", 1, "number of OSDs")
	mode := fs.String("mode", "", "force a connection mode: crc or secure (default: Ceph's)")
	mgr := fs.Bool("mgr", false, "also run a ceph-mgr")
	dir := fs.String("dir", "", "directory for the cluster (default: a temp dir, removed at exit)")
	exitAfter := fs.Duration("exit-after", 0, "stop after this long instead of waiting for Ctrl-C (for scripts)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "purerbd demo: booting a throwaway Ceph cluster on 127.0.0.1 ...")
	c, err := cephcluster.Start(ctx, cephcluster.Options{
		Mons: *mons, OSDs: *osds, Mode: *mode, WithMgr: *mgr, Dir: *dir, KeepDir: *dir != "",
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(stdout, "purerbd demo: stopping every daemon it started ...")
		if err := c.Close(); err != nil {
			fmt.Fprintf(stderr, "purerbd demo: %v\n", err)
		}
	}()
	fmt.Fprintf(stdout, `purerbd demo: cluster up in %v
  fsid          %s
  directory     %s
  ceph.conf     %s
  admin keyring %s
  mons (msgr2)  %v
  pool          %s
  daemons       %v

Point Ceph's tools at it:
  export CEPH_CONF=%s
  ceph -s
  rados -p %s ls
  rbd create --size 64M %s/demo && rbd info %s/demo

Ctrl-C stops every daemon this demo started.
`, c.Started.Round(time.Millisecond), c.FSID, c.Dir, c.Conf, c.AdminKeyring, c.MonAddrs, c.Pool, c.Daemons(),
		c.Conf, c.Pool, c.Pool, c.Pool)
	if *exitAfter > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(*exitAfter):
		}
	} else {
		<-ctx.Done()
	}
	return nil
}
