package main

import (
	"context"
	"strconv"
	"strings"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd create` and `clone`, and the options that shape a new
// image (create, clone, import).

// createFlags are the image-shaping options of create, import and clone.
type createFlags struct {
	objectSize, order, stripeUnit, stripeCount, dataPool string
	// features are the --image-feature values, each a comma-separated
	// list: the option accumulates, as rbd's does
	features []string
}

// register declares the options on cmd.
func (f *createFlags) register(cmd *cli.Command) {
	cmd.String(&f.objectSize, "--object-size SIZE", "object size, a power of two (e.g. 4M)")
	cmd.String(&f.order, "--order N", "object size as a power of two (12..25)")
	cmd.Func("--image-feature FEATURES", "image features, comma-separated; repeatable (default: rbd's defaults)",
		func(v []string) error {
			if _, err := rbd.ParseFeatures(v[0]); err != nil {
				return err
			}
			f.features = append(f.features, v[0])
			return nil
		})
	cmd.String(&f.stripeUnit, "--stripe-unit SIZE", "stripe unit")
	cmd.String(&f.stripeCount, "--stripe-count N", "stripe count")
	cmd.String(&f.dataPool, "--data-pool POOL", "data pool")
}

func (f *createFlags) options() (rbd.CreateOptions, error) {
	var o rbd.CreateOptions
	if f.order != "" {
		v, err := strconv.ParseUint(f.order, 10, 8)
		if err != nil {
			return o, cli.Usagef(cli.BadValue, "--order %q: want a number from 12 to 25", f.order)
		}
		o.Order = uint8(v)
	}
	if f.objectSize != "" {
		s, err := cli.ParseSize(f.objectSize, 1)
		if err != nil {
			return o, cli.Usagef(cli.BadValue, "--object-size: %v", err)
		}
		order := uint8(0)
		for uint64(1)<<order < uint64(s) {
			order++
		}
		if uint64(1)<<order != uint64(s) {
			return o, cli.Usagef(cli.BadValue, "--object-size %s is not a power of two", f.objectSize)
		}
		o.Order = order
	}
	if list := strings.Join(f.features, ","); list != "" {
		feat, err := rbd.ParseFeatures(list)
		if err != nil {
			return o, err
		}
		if feat == 0 {
			feat = rbd.FeatureNone
		}
		o.Features = feat
	}
	if f.stripeUnit != "" {
		s, err := cli.ParseSize(f.stripeUnit, 1)
		if err != nil {
			return o, cli.Usagef(cli.BadValue, "--stripe-unit: %v", err)
		}
		o.StripeUnit = uint64(s)
	}
	if f.stripeCount != "" {
		v, err := strconv.ParseUint(f.stripeCount, 10, 64)
		if err != nil {
			return o, cli.Usagef(cli.BadValue, "--stripe-count %q: want a natural number", f.stripeCount)
		}
		o.StripeCount = v
	}
	o.DataPool = f.dataPool
	return o, nil
}

// sizeOption declares -s/--size on cmd, a size as rbd takes it (MiB
// without a suffix).
func sizeOption(cmd *cli.Command, size *int64, help string) *cli.Option {
	return cmd.Func("-s, --size SIZE", help, func(v []string) error {
		n, err := cli.ParseSize(v[0], 1<<20)
		*size = n
		return err
	})
}

func (c *rbdCommand) createCommand() *cli.Command {
	var size int64
	var cf createFlags
	cmd := &cli.Command{
		Name: "create", Summary: "create an image", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return c.create(ctx, inv.Args[0], size, &cf)
		},
	}
	sizeOption(cmd, &size, "image size (MiB without a suffix)").Required()
	cf.register(cmd)
	return cmd
}

func (c *rbdCommand) create(ctx context.Context, spec string, size int64, cf *createFlags) error {
	opts, err := cf.options()
	if err != nil {
		return err
	}
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	return c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		return rbd.Create(ctx, ioc, sp.name, size, opts)
	})
}

func (c *rbdCommand) cloneCommand() *cli.Command {
	var cf createFlags
	cmd := &cli.Command{
		Name: "clone", Summary: "clone a protected snapshot into a new image", Args: "PARENT@SNAP CHILD",
		MinArgs: 2, MaxArgs: 2,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return c.clone(ctx, inv.Args[0], inv.Args[1], &cf)
		},
	}
	cf.register(cmd)
	return cmd
}

func (c *rbdCommand) clone(ctx context.Context, parentSpec, childSpec string, cf *createFlags) error {
	parent, err := c.parseSpec(parentSpec, true)
	if err != nil {
		return err
	}
	child, err := c.parseSpec(childSpec, false)
	if err != nil {
		return err
	}
	opts, err := cf.options()
	if err != nil {
		return err
	}
	return c.withPool(ctx, parent, func(pioc *rados.IOContext) error {
		return c.withPool(ctx, child, func(cioc *rados.IOContext) error {
			return rbd.Clone(ctx, pioc, parent.name, parent.snap, cioc, child.name, opts)
		})
	})
}
