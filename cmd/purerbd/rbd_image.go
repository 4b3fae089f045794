package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
	"github.com/purerbd/purerbd/rbd/luks"
)

// The verbs that change an image as a whole: rm, rename, resize, flatten.

func (c *rbdCommand) removeCommand() *cli.Command {
	var force bool
	cmd := &cli.Command{
		Name: "rm", Aliases: []string{"remove"}, Summary: "remove an image", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error { return c.remove(ctx, inv.Args[0], force) },
	}
	cmd.Bool(&force, "--force", "remove even if the image is open elsewhere")
	return cmd
}

func (c *rbdCommand) remove(ctx context.Context, spec string, force bool) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	err = c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		return rbd.Remove(ctx, ioc, sp.name, rbd.RemoveOptions{Force: force})
	})
	if errors.Is(err, rbd.ErrInGroup) {
		// rbd's EMLINK
		fmt.Fprintf(c.stderr, "rbd: error: %v\nRemove the image from the group and try again.\n", err)
		return cli.ExitStatus(errnoOf(err))
	}
	return err
}

func (c *rbdCommand) renameCommand() *cli.Command {
	return &cli.Command{
		Name: "rename", Aliases: []string{"mv"}, Summary: "rename an image (in its pool and namespace)",
		Args: "SRC DST", MinArgs: 2, MaxArgs: 2,
		Run: func(ctx context.Context, inv *cli.Invocation) error { return c.rename(ctx, inv.Args[0], inv.Args[1]) },
	}
}

func (c *rbdCommand) rename(ctx context.Context, srcSpec, dstSpec string) error {
	src, err := c.parseSpec(srcSpec, false)
	if err != nil {
		return err
	}
	dst, err := c.parseSpec(dstSpec, false)
	if err != nil {
		return err
	}
	if src.pool != dst.pool || src.ns != dst.ns {
		return errors.New("rename: source and destination must be in the same pool and namespace")
	}
	return c.withPool(ctx, src, func(ioc *rados.IOContext) error {
		return rbd.Rename(ctx, ioc, src.name, dst.name)
	})
}

func (c *rbdCommand) resizeCommand() *cli.Command {
	var size int64
	var allowShrink bool
	cmd := &cli.Command{
		Name: "resize", Summary: "change an image's size", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return c.resize(ctx, inv.Args[0], size, allowShrink)
		},
	}
	sizeOption(cmd, &size, "new size (MiB without a suffix)").Required()
	cmd.Bool(&allowShrink, "--allow-shrink", "allow shrinking")
	return cmd
}

func (c *rbdCommand) resize(ctx context.Context, spec string, size int64, allowShrink bool) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error {
		if size < img.Size() && !allowShrink {
			return errors.New("shrinking an image is only allowed with --allow-shrink")
		}
		return img.Resize(ctx, size)
	})
}

func (c *rbdCommand) flattenCommand() *cli.Command {
	var (
		noProgress bool
		enc        encryptionFlags
	)
	cmd := &cli.Command{
		Name: "flatten", Summary: "copy a clone's data from its parent and detach it", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Help: `An encrypted clone is flattened through its encryption, as rbd flatten
does with --encryption-format and --encryption-passphrase-file (repeated,
the clone's first, then its ancestors'): the parent's plaintext is copied
up under the clone's key, and a clone formatted with a key of its own gets
a plain LUKS header back. Such a clone is refused without them.`,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return c.flatten(ctx, inv.Args[0], noProgress, &enc)
		},
	}
	noProgressOption(cmd, &noProgress)
	cmd.Strings(&enc.formats, "--encryption-format FORMAT", "encryption format (luks, luks1, luks2); repeated for the clone's ancestors, the clone's first")
	cmd.Strings(&enc.passphraseFiles, "--encryption-passphrase-file PATH", "the passphrase, the file's whole content; repeated, one for each --encryption-format (alone: luks)")
	return cmd
}

func (c *rbdCommand) flatten(ctx context.Context, spec string, noProgress bool, enc *encryptionFlags) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	if err := enc.check(); err != nil {
		return err
	}
	pr := newProgress(c.stderr, "Image flatten", noProgress)
	err = c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error {
		if !enc.given() {
			// copying a clone with a key of its own up without its
			// encryption would leave the parent's ciphertext under the
			// clone's header: refused (librbd does not check)
			if h, err := luks.ReadHeader(ctx, img); err == nil && h.Clone {
				return errors.New("the image is an encrypted clone with a key of its own: flatten it with --encryption-format and --encryption-passphrase-file for it and its ancestors")
			}
			return img.FlattenProgress(ctx, pr.update)
		}
		e, err := enc.open(ctx, img)
		if err != nil {
			return err
		}
		return e.Flatten(ctx, pr.update)
	})
	pr.finish(err)
	if err != nil {
		return rbdFailure(c.stderr, "flatten", err)
	}
	return nil
}
