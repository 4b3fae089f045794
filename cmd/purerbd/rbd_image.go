package main

import (
	"context"
	"errors"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// The verbs that change an image as a whole: rm, rename, resize, flatten.

func (c *rbdCommand) remove(ctx context.Context, args []string) error {
	fs := newFlagSet("rm", c.stderr)
	force := fs.Bool("force", false, "remove even if the image is open elsewhere")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: rm IMAGE")
	}
	sp, err := c.parseSpec(pos[0], false)
	if err != nil {
		return err
	}
	return c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		return rbd.Remove(ctx, ioc, sp.name, rbd.RemoveOptions{Force: *force})
	})
}

func (c *rbdCommand) rename(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return errors.New("usage: rename SRC DST")
	}
	src, err := c.parseSpec(args[0], false)
	if err != nil {
		return err
	}
	dst, err := c.parseSpec(args[1], false)
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

func (c *rbdCommand) resize(ctx context.Context, args []string) error {
	fs := newFlagSet("resize", c.stderr)
	size := fs.String("size", "", "new size (MiB without a suffix)")
	s := fs.String("s", "", "new size (short for --size)")
	allowShrink := fs.Bool("allow-shrink", false, "allow shrinking")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *size == "" {
		*size = *s
	}
	if len(pos) != 1 || *size == "" {
		return errors.New("usage: resize --size SIZE [--allow-shrink] IMAGE")
	}
	sz, err := rbdSize(*size, 1<<20)
	if err != nil {
		return err
	}
	sp, err := c.parseSpec(pos[0], false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error {
		if sz < img.Size() && !*allowShrink {
			return errors.New("shrinking an image is only allowed with --allow-shrink")
		}
		return img.Resize(ctx, sz)
	})
}

func (c *rbdCommand) flatten(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: flatten IMAGE")
	}
	sp, err := c.parseSpec(args[0], false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error { return img.Flatten(ctx) })
}
