package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd feature enable|disable`: turn exclusive-lock, object-map
// and fast-diff on or off, and deep-flatten off, as rbd does.

func (c *rbdCommand) featureCommand() *cli.Command {
	verb := func(name string, enable bool) *cli.Command {
		return &cli.Command{
			Name: name, Summary: name + " image features", Args: "IMAGE FEATURE [FEATURE...]", MinArgs: 2,
			MaxArgs: cli.Unlimited,
			Run: func(ctx context.Context, inv *cli.Invocation) error {
				return c.updateFeatures(ctx, inv.Args[0], inv.Args[1:], enable)
			},
		}
	}
	group := &cli.Command{Name: "feature", Summary: "turn image features on or off: enable, disable"}
	return group.Add(verb("enable", true), verb("disable", false))
}

func (c *rbdCommand) updateFeatures(ctx context.Context, spec string, names []string, enable bool) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	if sp.snap != "" {
		return cli.Usagef(cli.BadArgument, "snapshot name specified for a command that doesn't use it")
	}
	f, err := rbd.ParseFeatures(strings.Join(names, ","))
	if err != nil {
		return cli.Usagef(cli.BadValue, "%v", err)
	}
	err = c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error {
		if enable {
			return img.EnableFeatures(ctx, f)
		}
		return img.DisableFeatures(ctx, f)
	})
	if err != nil {
		fmt.Fprintf(c.stderr, "rbd: failed to update image features: %v\n", err)
		return cli.ExitStatus(errnoOf(err))
	}
	return nil
}
