package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/ublk"
)

// `purerbd device map|unmap -t ublk|nbd`: an image (or a memory disk,
// or a file) as a kernel block device served by this process, through
// ublk (/dev/ublkbN, Linux 6.0+ with ublk_drv) or nbd.ko (/dev/nbdN, as
// `purerbd nbd map`). Needs CAP_SYS_ADMIN.

// Device types of -t.
const (
	deviceAuto = "auto"
	deviceUblk = "ublk"
	deviceNBD  = "nbd"
)

// maxUblkQueues bounds --queues (the kernel caps it at the CPU count).
const maxUblkQueues = 64

func deviceCommand(g *globals) *cli.Command {
	c := &cli.Command{
		Name:    "device",
		Summary: "map images, files or memory to the kernel through ublk or nbd (device map|unmap)",
		Help: `Maps an RBD image (or a memory disk, or a file) to the kernel as a block
device served by this process: -t ublk makes /dev/ublkbN (Linux 6.0 and
later, module ublk_drv), -t nbd makes /dev/nbdN as purerbd nbd map does,
-t auto (the default) takes ublk where the kernel has it.`,
	}
	return c.Add(deviceMapCommand(g), deviceUnmapCommand())
}

// deviceMapOptions are device map's options as given.
type deviceMapOptions struct {
	typ, snap, memory, file string
	readOnly, exclusive     bool
	releaseOnExit           bool
	queues, depth           int
	recover                 string
	encryption              encryptionFlags
}

func deviceMapCommand(g *globals) *cli.Command {
	o := &deviceMapOptions{typ: deviceAuto, queues: 1, depth: ublk.DefaultQueueDepth}
	c := &cli.Command{
		Name:    "map",
		Summary: "attach an image (or a memory disk, or a file) as /dev/ublkbN or /dev/nbdN and serve it",
		Args:    "[POOL/[NAMESPACE/]IMAGE[@SNAP]]",
		MaxArgs: 1,
		Help: `Attaches an RBD image (or a memory disk, or a file) to the kernel and
serves it in the foreground; it prints the device. Ctrl-C unmaps, unless
--release-on-exit leaves a ublk device for a later --recover (its I/O
waits meanwhile). If this process dies, a new one started with
--recover N takes /dev/ublkbN over without an I/O error. Needs
CAP_SYS_ADMIN.`,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return o.run(ctx, g, inv.Args, inv.Stdout, inv.Stderr)
		},
	}
	c.Choice(&o.typ, "-t, --type TYPE", []string{deviceAuto, deviceUblk, deviceNBD}, "kernel driver: ublk, nbd, or auto (ublk where the kernel has it)")
	c.String(&o.snap, "--snap SNAP", "map this snapshot (read-only)")
	c.Bool(&o.readOnly, "--read-only", "map read-only")
	c.Bool(&o.exclusive, "--exclusive", "keep the exclusive lock, refuse to hand it over")
	c.Int(&o.queues, "--queues N", "hardware queues (ublk: one thread each; nbd: one connection each)")
	c.Int(&o.depth, "--queue-depth N", "requests in flight per ublk queue")
	c.String(&o.recover, "--recover /dev/ublkbN", "take over this ublk device, whose server died (with the same image or file)")
	c.Bool(&o.releaseOnExit, "--release-on-exit", "on exit leave the ublk device for a later --recover instead of unmapping it")
	c.String(&o.memory, "--memory SIZE", "map a sparse in-memory disk of this size instead of an image")
	c.String(&o.file, "--file PATH", "map this file instead of an image")
	o.encryption.register(c)
	return c
}

func (o *deviceMapOptions) run(ctx context.Context, g *globals, pos []string, stdout, stderr io.Writer) error {
	typ := o.typ
	if typ == deviceAuto {
		typ = deviceNBD
		if loadUblkModule(ctx) == nil {
			typ = deviceUblk
		}
	}
	if typ == deviceNBD {
		if o.recover != "" || o.depth != ublk.DefaultQueueDepth {
			return errors.New("--recover and --queue-depth are for -t ublk")
		}
		mo := newMapOptions()
		mo.snap, mo.memory, mo.file, mo.readOnly, mo.exclusive = o.snap, o.memory, o.file, o.readOnly, o.exclusive
		mo.conns, mo.releaseOnExit, mo.encryption = o.queues, o.releaseOnExit, o.encryption
		m, err := mo.check(pos)
		if err != nil {
			return err
		}
		return mapDevice(ctx, g, m, stdout, stderr)
	}
	return o.mapUblk(ctx, g, pos, stdout, stderr)
}

// loadUblkModule loads ublk_drv unless it is there already.
func loadUblkModule(ctx context.Context) error {
	_, err := os.Stat("/proc/modules")
	return ublk.LoadModule(ctx, ublk.ModuleConfig{IgnoreStatus: err != nil})
}

// ublkIndex returns N of /dev/ublkbN (or ublkbN, or N).
func ublkIndex(dev string) (int, error) {
	rest := strings.TrimPrefix(strings.TrimPrefix(dev, "/dev/"), "ublkb")
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, fmt.Errorf("%q is not a ublk device (want /dev/ublkbN)", dev)
	}
	return n, nil
}

func (o *deviceMapOptions) mapUblk(ctx context.Context, g *globals, pos []string, stdout, stderr io.Writer) error {
	recoverID := -1
	if err := o.encryption.check(); err != nil {
		return err
	}
	switch {
	case o.memory != "" && o.file != "":
		return errors.New("give --memory or --file, not both")
	case (o.memory != "" || o.file != "") && (len(pos) != 0 || o.snap != "" || o.exclusive || o.encryption.given()):
		return errors.New("--memory and --file take no image, --snap, --exclusive or --encryption-format")
	case o.memory == "" && o.file == "" && len(pos) != 1:
		return errors.New("want exactly one POOL/IMAGE[@SNAP] (or --memory/--file)")
	case o.queues < 1 || o.queues > maxUblkQueues:
		return fmt.Errorf("--queues %d: want 1 to %d", o.queues, maxUblkQueues)
	case o.depth < 1 || o.depth > 4096:
		return fmt.Errorf("--queue-depth %d: want 1 to 4096", o.depth)
	case o.memory != "" && o.recover != "":
		return errors.New("--recover needs the data the dead server had: an image or --file, not --memory")
	}
	if o.recover != "" {
		var err error
		if recoverID, err = ublkIndex(o.recover); err != nil {
			return err
		}
	}
	if err := loadUblkModule(ctx); err != nil {
		return err
	}
	var (
		backend nbd.Backend
		what    string
	)
	switch {
	case o.memory != "":
		size, err := cli.ParseSize(o.memory, 1)
		if err != nil || size == 0 {
			return fmt.Errorf("--memory %q: want a size such as 64M", o.memory)
		}
		if backend, err = nbd.NewMemory(size); err != nil {
			return err
		}
		what = "memory disk"
	case o.file != "":
		f, err := nbd.OpenFile(o.file, o.readOnly)
		if err != nil {
			return err
		}
		defer f.Close()
		backend, what = f, o.file
	default:
		ie, err := openImageExport(ctx, g, pos[0], imageExportOptions{snap: o.snap, readOnly: o.readOnly, exclusive: o.exclusive, encryption: o.encryption})
		if err != nil {
			return err
		}
		defer ie.close(stderr)
		backend, what = ie.backend, ie.spec.String()
	}
	log := g.logger(slog.LevelWarn)
	cfg := ublk.Config{Backend: backend, Queues: o.queues, QueueDepth: o.depth, Logger: log}
	var (
		dev *ublk.Device
		err error
	)
	if recoverID >= 0 {
		dev, err = ublk.Recover(ctx, recoverID, cfg)
	} else {
		dev, err = ublk.Serve(ctx, cfg)
	}
	if err != nil {
		return fmt.Errorf("mapping %s: %w", what, err)
	}
	fmt.Fprintln(stdout, dev.Path())
	select {
	case <-ctx.Done():
	case <-dev.Done():
		// stopped elsewhere (purerbd device unmap): let go of it
		err := dev.Err()
		dev.Abandon()
		return err
	}
	if o.releaseOnExit {
		fmt.Fprintf(stderr, "purerbd device: releasing %s for a later --recover %s\n", dev.Path(), dev.Path())
		dev.Abandon()
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return dev.Stop(sctx)
}

func deviceUnmapCommand() *cli.Command {
	return &cli.Command{
		Name:    "unmap",
		Summary: "unmap /dev/ublkbN or /dev/nbdN (its server then exits)",
		Args:    "DEVICE",
		MinArgs: 1,
		MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			dev := inv.Args[0]
			if strings.HasPrefix(strings.TrimPrefix(dev, "/dev/"), "nbd") {
				return unmapDevice(ctx, inv.Args, "")
			}
			id, err := ublkIndex(dev)
			if err != nil {
				return err
			}
			return ublk.Remove(ctx, id)
		},
	}
}
