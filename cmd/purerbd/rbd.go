package main

import (
	"context"
	"io"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd`: RBD image administration with the `rbd` CLI's verbs,
// argument order and (for --format json) output keys where they overlap.
// Each verb (or group of verbs) lives in a file rbd_*.go.

// rbdCommand holds what every verb shares: the pool and namespace of
// image specs that name none, the connection (made by the first verb
// that needs it) and the verb's outputs.
type rbdCommand struct {
	g         *globals
	radosConn *rados.Conn
	pool      string
	ns        string
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
}

// newRBDCommand is the rbd group: its options and its verbs.
func newRBDCommand(g *globals) *cli.Command {
	c := &rbdCommand{g: g, pool: "rbd"}
	group := &cli.Command{
		Name:    "rbd",
		Summary: "manage RBD images (create, info, ls, rm, resize, snap, children, cp, deep cp, sparsify, namespace, group, pool init, trash ls, lock, feature, import, export, diff, export-diff, import-diff, du, bench, object-map, watch, device, map, unmap, showmapped)",
		Help: `Manages RBD images as Ceph's rbd tool does. IMAGE is [POOL/[NAMESPACE/]]NAME;
sizes take K/M/G/T suffixes (--size without a suffix is in MiB, as in rbd).`,
		UsageStatus: rbdUsageStatus,
		Before: func(_ context.Context, inv *cli.Invocation) (func(), error) {
			c.stdin, c.stdout, c.stderr = inv.Stdin, inv.Stdout, inv.Stderr
			return c.close, nil
		},
	}
	group.String(&c.pool, "-p, --pool POOL", "pool of the images whose spec names none")
	group.String(&c.ns, "--namespace NS", "namespace of the images whose spec names no pool")
	group.Add(
		c.createCommand(),
		c.infoCommand(),
		c.listCommand(),
		c.removeCommand(),
		c.renameCommand(),
		c.resizeCommand(),
		c.snapCommand(),
		c.cloneCommand(),
		c.flattenCommand(),
		c.childrenCommand(),
		c.copyCommand(),
		c.deepCommand(),
		c.sparsifyCommand(),
		c.namespaceCommand(),
		c.groupCommand(),
		c.poolCommand(),
		c.trashCommand(),
		c.featureCommand(),
		c.imageMetaCommand(),
		c.encryptionCommand(),
		c.importCommand(),
		c.exportCommand(),
		c.diffCommand(),
		c.exportDiffCommand(),
		c.importDiffCommand(),
		c.duCommand(),
		c.benchCommand(),
		c.statusCommand(),
		c.lockCommand(),
		c.objectMapCommand(),
		c.watchCommand(),
	)
	group.Add(c.deviceCommand())
	return group.Add(c.shorthandCommands()...)
}

// rbdUsageStatus exits as the rbd tool does on a mistake in its command
// line: EINVAL (22) when something is missing or an image spec is
// malformed, 1 for the rest (unknown options and commands, bad option
// values, extra arguments).
func rbdUsageStatus(k cli.ErrorKind) int {
	if k == cli.MissingArgument || k == cli.BadArgument {
		return 22
	}
	return 1
}

// close closes the connection, if a verb made one.
func (c *rbdCommand) close() {
	if c.radosConn != nil {
		_ = c.radosConn.Close()
		c.radosConn = nil
	}
}

// withImage opens sp's image and runs f.
func (c *rbdCommand) withImage(ctx context.Context, sp imageSpec, opts rbd.OpenOptions, f func(img *rbd.Image) error) error {
	return c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		img, err := rbd.Open(ctx, ioc, sp.name, opts)
		if err != nil {
			return err
		}
		ferr := f(img)
		cerr := img.Close()
		if ferr != nil {
			return ferr
		}
		return cerr
	})
}

// withPool connects to the cluster (once per command) and runs f with an
// I/O context for sp's pool and namespace.
func (c *rbdCommand) withPool(ctx context.Context, sp imageSpec, f func(ioc *rados.IOContext) error) error {
	if c.radosConn == nil {
		conn, err := c.g.connectRados(ctx)
		if err != nil {
			return err
		}
		c.radosConn = conn
	}
	ioc, err := c.radosConn.IOContext(ctx, sp.pool, sp.ns)
	if err != nil {
		return err
	}
	return f(ioc)
}

// formatOption declares --format on cmd: json, or plain text (any other
// value, as before).
func formatOption(cmd *cli.Command, format *string) {
	*format = "plain"
	cmd.String(format, "--format FORMAT", "json, or plain text")
}
