package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/kernel"
	"github.com/purerbd/purerbd/nbd/rbdnbd"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
	"github.com/purerbd/purerbd/rbd"
)

// demoOptions are demo's options.
type demoOptions struct {
	mons, osds int
	mode       string
	mgr        bool
	dir        string
	exitAfter  time.Duration
}

// demoCommand is `purerbd-dev demo` (make demo).
func demoCommand() *cli.Command {
	o := demoOptions{mons: 1, osds: 1}
	c := &cli.Command{
		Name:    "demo",
		Summary: "boot a throwaway Ceph cluster on 127.0.0.1 and show how to use it",
		Help: `Boots a throwaway Ceph cluster on 127.0.0.1 (one mon, one OSD, an rbd pool)
and shows how to reach it; creates an image demo/disk with purerbd, writes a
pattern, shows that librbd reads the same bytes, and attaches the image as
/dev/nbdN through the kernel where the machine allows it (root, nbd.ko), or
else exports it over NBD on a Unix socket, saying which. Then it walks
purerbd-csi's controller, served in this process on a Unix socket, through
create, snapshot, clone, expand and delete. It waits for Ctrl-C (or
--exit-after), then stops the export and every daemon it started.`,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return runDemo(ctx, o, inv.Stdout, inv.Stderr)
		},
	}
	c.Int(&o.mons, "--mons N", "number of monitors")
	c.Int(&o.osds, "--osds N", "number of OSDs")
	c.Choice(&o.mode, "--mode MODE", []string{"crc", "secure"}, "force a connection mode: crc or secure (default: Ceph's)")
	c.Bool(&o.mgr, "--mgr", "also run a ceph-mgr")
	c.String(&o.dir, "--dir DIR", "directory for the cluster (default: a temp dir, removed at exit)")
	c.Duration(&o.exitAfter, "--exit-after D", "stop after this long instead of waiting for Ctrl-C (for scripts)")
	return c
}

// runDemo boots the embedded default cluster (one mon, one OSD, an rbd
// pool on 127.0.0.1) and walks through purerbd on it, as demoCommand's
// help says.
func runDemo(ctx context.Context, o demoOptions, stdout, stderr io.Writer) error {
	fmt.Fprintln(stdout, "purerbd demo: booting a throwaway Ceph cluster on 127.0.0.1 ...")
	c, err := cephcluster.Start(ctx, cephcluster.Options{
		Mons: o.mons, OSDs: o.osds, Mode: o.mode, WithMgr: o.mgr, Dir: o.dir, KeepDir: o.dir != "",
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

`, c.Started.Round(time.Millisecond), c.FSID, c.Dir, c.Conf, c.AdminKeyring, c.MonAddrs, c.Pool, c.Daemons(),
		c.Conf, c.Pool, c.Pool, c.Pool)
	if root := c.Root(); root != "" {
		// The host's tools may not speak this release (Tentacle's keys
		// are of a type Pacific's tools cannot read).
		fmt.Fprintf(stdout, `The daemons are Ceph %s's, from %s: run that release's tools there
(chroot), with %s bound at the same path inside.

`, c.Options.Release, root, c.Dir)
	}

	d, err := startDemoDisk(ctx, c, o.mode, stdout)
	if err != nil {
		return err
	}
	defer d.close(stdout, stderr)

	cs, err := startDemoCSI(c, stderr)
	if err != nil {
		return fmt.Errorf("starting the CSI controller: %w", err)
	}
	defer func() {
		fmt.Fprintln(stdout, "purerbd demo: stopping the CSI controller ...")
		cs.close(stderr)
	}()
	if err := runDemoCSI(ctx, c, cs, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "purerbd-csi's controller keeps serving unix://%s until the demo stops.\n", cs.sock)

	fmt.Fprintln(stdout, "Ctrl-C stops every daemon this demo started.")
	if o.exitAfter > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(o.exitAfter):
		}
	} else {
		<-ctx.Done()
	}
	return nil
}

// The demo disk: an RBD image made and written by purerbd, read back by
// librbd, and exported over NBD.
const (
	demoPool  = "demo"
	demoImage = "disk"
	demoSize  = 256 << 20
	// demoStride: one recognisable block at the start of every object.
	demoStride = 4 << 20
	demoBlock  = 64 << 10
)

// demoDisk is the demo's image, open and served over NBD.
type demoDisk struct {
	conn   *rados.Conn
	img    *rbd.Image
	srv    *nbd.Server
	served chan error
	dev    *kernel.Device // attached through the kernel, if the machine allows
}

// demoBlockData is the block written at off: a line of text naming it,
// then bytes that count up.
func demoBlockData(off int64) []byte {
	p := make([]byte, demoBlock)
	for i := range p {
		p[i] = byte(i)
	}
	copy(p, fmt.Sprintf("purerbd demo block at offset %d (object %d)\n", off, off/demoStride))
	return p
}

// startDemoDisk creates demo/disk with purerbd, writes the pattern,
// compares purerbd's and librbd's view (sha256 of the whole image) and
// attaches it through the kernel or, where that is not possible, serves
// it over NBD on a Unix socket in the cluster's directory.
func startDemoDisk(ctx context.Context, c *cephcluster.Cluster, mode string, stdout io.Writer) (_ *demoDisk, err error) {
	spec := demoPool + "/" + demoImage
	fmt.Fprintf(stdout, "purerbd demo: creating pool %s and image %s (%d MiB, default features) with purerbd ...\n", demoPool, spec, demoSize>>20)
	conn, err := rados.Connect(ctx, rados.Config{MonHost: strings.Join(c.MonAddrs, ","), Key: c.AdminKey,
		MonMode: mode, Mode: mode, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("connecting to the demo cluster: %w", err)
	}
	d := &demoDisk{conn: conn}
	defer func() {
		if err != nil {
			d.close(io.Discard, io.Discard)
		}
	}()
	for _, cmd := range []string{
		fmt.Sprintf(`{"prefix":"osd pool create","pool":%q,"pg_num":8,"pgp_num":8,"pool_type":"replicated"}`, demoPool),
		fmt.Sprintf(`{"prefix":"osd pool application enable","pool":%q,"app":"rbd"}`, demoPool),
	} {
		if _, status, err := conn.MonCommand(ctx, []byte(cmd)); err != nil {
			return nil, fmt.Errorf("mon command %s: %w (%s)", cmd, err, status)
		}
	}
	if err := conn.WaitForLatestOSDMap(ctx); err != nil {
		return nil, err
	}
	ioc, err := conn.IOContext(ctx, demoPool, "")
	if err != nil {
		return nil, err
	}
	if err := rbd.Create(ctx, ioc, demoImage, demoSize, rbd.CreateOptions{}); err != nil {
		return nil, err
	}
	if d.img, err = rbd.Open(ctx, ioc, demoImage, rbd.OpenOptions{AcquireLock: true}); err != nil {
		return nil, err
	}
	for off := int64(0); off < demoSize; off += demoStride {
		if _, err := d.img.WriteAtContext(ctx, demoBlockData(off), off); err != nil {
			return nil, fmt.Errorf("writing the demo pattern: %w", err)
		}
	}
	fmt.Fprintf(stdout, "purerbd demo: wrote a %d KiB block at the start of each of the %d objects\n", demoBlock>>10, demoSize/demoStride)

	mine, err := imageSHA256(ctx, d.img)
	if err != nil {
		return nil, err
	}
	info, err := c.Rbd(ctx, "info", spec)
	if err != nil {
		return nil, err
	}
	theirs, err := librbdSHA256(ctx, c, spec)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "\nrbd info %s (librbd):\n%s\n", spec, info)
	fmt.Fprintf(stdout, "sha256 via purerbd:           %s\n", mine)
	fmt.Fprintf(stdout, "sha256 via librbd rbd export: %s\n", theirs)
	if mine != theirs {
		return nil, fmt.Errorf("purerbd and librbd read different data from %s", spec)
	}
	fmt.Fprintln(stdout, "purerbd and librbd see the same bytes.")

	b := rbdnbd.New(d.img)
	// Through the kernel where the machine allows it; the userspace
	// export otherwise. Either way the demo says which.
	dev, why := attachDemoKernel(ctx, b, mine)
	if dev != nil {
		d.dev = dev
		fmt.Fprintf(stdout, `
NBD path: KERNEL. %s is attached as %s through the kernel's nbd driver,
served by this process (pure Go, no rbd-nbd, no librbd); the kernel read the
whole device and got the same sha256.
Try (as root):
  blockdev --getsize64 %s
  head -c 64 %s
  dd if=%s bs=4M status=none | sha256sum

`, spec, dev.Path(), dev.Path(), dev.Path(), dev.Path())
		return d, nil
	}
	fmt.Fprintf(stdout, "\nNBD path: USERSPACE. No kernel attach on this machine: %v.\n", why)
	if d.srv, err = nbd.NewServer(nbd.Config{Exports: []*nbd.Export{{Name: "", Description: "rbd " + spec, Backend: b}}}); err != nil {
		return nil, err
	}
	sock := filepath.Join(c.Dir, "disk.sock")
	l, err := nbd.ListenUnix(sock, 0)
	if err != nil {
		return nil, err
	}
	d.served = make(chan error, 1)
	go func() { d.served <- d.srv.Serve(context.Background(), l) }()
	uri := "nbd+unix:///?socket=" + sock
	fmt.Fprintf(stdout, `
%s is exported over NBD on a Unix socket instead (read-write, by this process;
any NBD client reaches it, no kernel module needed):
  %s
Try:
  nbdinfo '%s'
  nbdinfo --map '%s'
  nbdcopy '%s' - | sha256sum
  qemu-io -f raw -c 'read -v 0 64' '%s'
  qemu-io -f raw -c 'write -P 0x5a 1M 64k' '%s' && rbd export %s - | sha256sum

`, spec, uri, uri, uri, uri, uri, uri, spec)
	return d, nil
}

// close stops the NBD server and closes the image and the connection.
func (d *demoDisk) close(stdout, stderr io.Writer) {
	if d.dev != nil {
		fmt.Fprintf(stdout, "purerbd demo: detaching %s ...\n", d.dev.Path())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := d.dev.Detach(ctx); err != nil {
			fmt.Fprintf(stderr, "purerbd demo: detaching %s: %v\n", d.dev.Path(), err)
		}
		cancel()
	}
	if d.srv != nil {
		fmt.Fprintln(stdout, "purerbd demo: stopping the NBD export ...")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := d.srv.Shutdown(ctx); err != nil {
			fmt.Fprintf(stderr, "purerbd demo: NBD shutdown: %v\n", err)
		}
		cancel()
		<-d.served
	}
	if d.img != nil {
		if err := d.img.Close(); err != nil {
			fmt.Fprintf(stderr, "purerbd demo: closing the image: %v\n", err)
		}
	}
	_ = d.conn.Close()
}

// imageSHA256 hashes the whole image as purerbd reads it.
func imageSHA256(ctx context.Context, img *rbd.Image) (string, error) {
	h := sha256.New()
	buf := make([]byte, 4<<20)
	for off := int64(0); off < img.Size(); off += int64(len(buf)) {
		n, err := img.ReadAtContext(ctx, buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		h.Write(buf[:n])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// librbdSHA256 hashes `rbd export SPEC -`, run by the cluster's own
// release of rbd.
func librbdSHA256(ctx context.Context, c *cephcluster.Cluster, spec string) (string, error) {
	cmd := c.ToolCommand(ctx, "rbd", "export", "--no-progress", spec, "-")
	h := sha256.New()
	var errb strings.Builder
	cmd.Stdout, cmd.Stderr = h, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("rbd export %s: %w: %s", spec, err, errb.String())
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
