package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd snap rename`, `purge` and `limit set|clear`, with rbd's
// arguments, messages and exit statuses.

func (c *rbdCommand) snapRenameCommand() *cli.Command {
	return &cli.Command{
		Name: "rename", Summary: "rename a snapshot", Args: "IMAGE@SNAP IMAGE@NEW-SNAP", MinArgs: 2, MaxArgs: 2,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return c.snapRename(ctx, inv.Args[0], inv.Args[1])
		},
	}
}

func (c *rbdCommand) snapRename(ctx context.Context, srcSpec, dstSpec string) error {
	src, err := c.parseSpec(srcSpec, true)
	if err != nil {
		return err
	}
	dst, err := c.parseSpec(dstSpec, false)
	if err != nil {
		return err
	}
	if dst.snap == "" {
		return cli.Usagef(cli.MissingArgument, "destination snapshot name was not specified")
	}
	if src.pool != dst.pool || src.ns != dst.ns || src.name != dst.name {
		return cli.Usagef(cli.BadArgument, "source and destination image name must be the same")
	}
	err = c.withPool(ctx, src, func(ioc *rados.IOContext) error {
		id, err := rbd.ImageID(ctx, ioc, src.name)
		if err != nil {
			return err
		}
		return rbd.RenameSnapshot(ctx, ioc, id, src.snap, dst.snap)
	})
	if err != nil {
		return rbdFailure(c.stderr, "snap rename", err)
	}
	return nil
}

func (c *rbdCommand) snapPurgeCommand() *cli.Command {
	var noProgress bool
	cmd := &cli.Command{
		Name: "purge", Summary: "remove every unprotected snapshot of an image", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error { return c.snapPurge(ctx, inv.Args[0], noProgress) },
	}
	noProgressOption(cmd, &noProgress)
	return cmd
}

// snapPurge removes the image's user snapshots, oldest first, except the
// protected ones, which it names on standard output and leaves, as rbd
// snap purge does (and, as it does, exits 0 then).
func (c *rbdCommand) snapPurge(ctx context.Context, spec string, noProgress bool) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	if sp.snap != "" {
		return cli.Usagef(cli.BadArgument, "snapshot name specified for a command that doesn't use it")
	}
	err = c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error {
		snaps, err := img.Snapshots(ctx)
		if err != nil {
			return err
		}
		sort.Slice(snaps, func(i, j int) bool { return snaps[i].ID < snaps[j].ID })
		var remove, protected []string
		for _, s := range snaps {
			switch {
			case s.Namespace != rbd.SnapNamespaceUser:
			case s.Protected:
				protected = append(protected, s.Name)
			default:
				remove = append(remove, s.Name)
			}
		}
		if len(remove)+len(protected) == 0 {
			return nil
		}
		if len(protected) > 0 {
			verb := "are"
			if len(protected) == 1 {
				verb = "is"
			}
			fmt.Fprintf(c.stdout, "rbd: error removing snapshot(s) '%s', which %s protected - these must be unprotected with `rbd snap unprotect`.\n",
				strings.Join(protected, ","), verb)
		}
		p := newProgress(c.stderr, "Removing all snapshots", noProgress)
		total := uint64(len(remove) + len(protected))
		for i, name := range remove {
			if err := img.RemoveSnapshot(ctx, name); err != nil {
				p.finish(err)
				return err
			}
			p.update(uint64(i+1), total)
		}
		if len(protected) > 0 {
			p.finish(fmt.Errorf("protected snapshots left"))
		} else {
			p.finish(nil)
		}
		return nil
	})
	if err != nil {
		return rbdFailure(c.stderr, "snap purge", err)
	}
	return nil
}

func (c *rbdCommand) snapLimitCommand() *cli.Command {
	var (
		limit    uint64
		limitSet bool
	)
	set := &cli.Command{
		Name: "set", Summary: "cap the number of an image's snapshots", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			if !limitSet {
				// rbd's message and status (ERANGE) for a missing --limit
				fmt.Fprintln(c.stderr, "rbd: must specify --limit <num>")
				return cli.ExitStatus(34)
			}
			return c.snapLimit(ctx, inv.Args[0], limit)
		},
	}
	set.Func("--limit NUM", "the most snapshots the image may have", func(vals []string) error {
		n, err := strconv.ParseUint(vals[len(vals)-1], 10, 64)
		if err != nil {
			return fmt.Errorf("bad --limit %q", vals[len(vals)-1])
		}
		limit, limitSet = n, true
		return nil
	})
	clear := &cli.Command{
		Name: "clear", Summary: "lift the cap on the number of an image's snapshots", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return c.snapLimit(ctx, inv.Args[0], rbd.NoSnapshotLimit)
		},
	}
	group := &cli.Command{Name: "limit", Summary: "an image's snapshot limit: set, clear"}
	return group.Add(set, clear)
}

func (c *rbdCommand) snapLimit(ctx context.Context, spec string, limit uint64) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	if sp.snap != "" {
		return cli.Usagef(cli.BadArgument, "snapshot name specified for a command that doesn't use it")
	}
	err = c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error { return img.SetSnapshotLimit(ctx, limit) })
	if err != nil {
		return rbdFailure(c.stderr, "snap limit", err)
	}
	return nil
}
