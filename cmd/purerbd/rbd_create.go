package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd create` and `clone`, and the options that shape a new
// image (create, clone, import).

// createFlags are the image-shaping options of create, import and clone.
type createFlags struct {
	objectSize, order, features, stripeUnit, stripeCount, dataPool *string
}

func addCreateFlags(fs *flag.FlagSet) createFlags {
	return createFlags{
		objectSize:  fs.String("object-size", "", "object size (e.g. 4M)"),
		order:       fs.String("order", "", "object order (12..25)"),
		features:    fs.String("image-feature", "", "comma-separated image features"),
		stripeUnit:  fs.String("stripe-unit", "", "stripe unit"),
		stripeCount: fs.String("stripe-count", "", "stripe count"),
		dataPool:    fs.String("data-pool", "", "data pool"),
	}
}

func (f createFlags) options() (rbd.CreateOptions, error) {
	var o rbd.CreateOptions
	if *f.order != "" {
		v, err := strconv.ParseUint(*f.order, 10, 8)
		if err != nil {
			return o, fmt.Errorf("--order: %w", err)
		}
		o.Order = uint8(v)
	}
	if *f.objectSize != "" {
		s, err := rbdSize(*f.objectSize, 1)
		if err != nil {
			return o, fmt.Errorf("--object-size: %w", err)
		}
		order := uint8(0)
		for uint64(1)<<order < uint64(s) {
			order++
		}
		if uint64(1)<<order != uint64(s) {
			return o, fmt.Errorf("--object-size %s is not a power of two", *f.objectSize)
		}
		o.Order = order
	}
	if *f.features != "" {
		feat, err := rbd.ParseFeatures(*f.features)
		if err != nil {
			return o, err
		}
		if feat == 0 {
			feat = rbd.FeatureNone
		}
		o.Features = feat
	}
	if *f.stripeUnit != "" {
		s, err := rbdSize(*f.stripeUnit, 1)
		if err != nil {
			return o, fmt.Errorf("--stripe-unit: %w", err)
		}
		o.StripeUnit = uint64(s)
	}
	if *f.stripeCount != "" {
		v, err := strconv.ParseUint(*f.stripeCount, 10, 64)
		if err != nil {
			return o, fmt.Errorf("--stripe-count: %w", err)
		}
		o.StripeCount = v
	}
	o.DataPool = *f.dataPool
	return o, nil
}

func (c *rbdCommand) create(ctx context.Context, args []string) error {
	fs := newFlagSet("create", c.stderr)
	size := fs.String("size", "", "image size (MiB without a suffix)")
	s := fs.String("s", "", "image size (short for --size)")
	cf := addCreateFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *size == "" {
		*size = *s
	}
	if len(pos) != 1 || *size == "" {
		return errors.New("usage: create --size SIZE IMAGE")
	}
	sz, err := rbdSize(*size, 1<<20)
	if err != nil {
		return err
	}
	opts, err := cf.options()
	if err != nil {
		return err
	}
	sp, err := c.parseSpec(pos[0], false)
	if err != nil {
		return err
	}
	return c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		return rbd.Create(ctx, ioc, sp.name, uint64(sz), opts)
	})
}

func (c *rbdCommand) clone(ctx context.Context, args []string) error {
	fs := newFlagSet("clone", c.stderr)
	cf := addCreateFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return errors.New("usage: clone PARENT@SNAP CHILD")
	}
	parent, err := c.parseSpec(pos[0], true)
	if err != nil {
		return err
	}
	child, err := c.parseSpec(pos[1], false)
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
