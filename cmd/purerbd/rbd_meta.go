package main

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd image-meta`: an image's metadata (key/value pairs).

func (c *rbdCommand) imageMetaCommand() *cli.Command {
	// verb is one of the group's verbs, which open the image (read-only
	// unless they change it) and run f on it with their arguments after
	// IMAGE
	verb := func(name string, aliases []string, summary, args string, n int, ro bool,
		f func(ctx context.Context, img *rbd.Image, args []string) error) *cli.Command {
		return &cli.Command{
			Name: name, Aliases: aliases, Summary: summary, Args: args, MinArgs: n, MaxArgs: n,
			Run: func(ctx context.Context, inv *cli.Invocation) error {
				sp, err := c.parseSpec(inv.Args[0], false)
				if err != nil {
					return err
				}
				return c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: ro}, func(img *rbd.Image) error {
					return f(ctx, img, inv.Args[1:])
				})
			},
		}
	}
	group := &cli.Command{Name: "image-meta", Summary: "an image's metadata: get, set, remove, list"}
	return group.Add(
		verb("get", nil, "print a metadata value", "IMAGE KEY", 2, true, func(ctx context.Context, img *rbd.Image, a []string) error {
			v, err := img.MetadataGet(ctx, a[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(c.stdout, v)
			return nil
		}),
		verb("set", nil, "set a metadata value", "IMAGE KEY VALUE", 3, false, func(ctx context.Context, img *rbd.Image, a []string) error {
			return img.MetadataSet(ctx, a[0], a[1])
		}),
		verb("remove", []string{"rm"}, "remove a metadata key", "IMAGE KEY", 2, false, func(ctx context.Context, img *rbd.Image, a []string) error {
			return img.MetadataRemove(ctx, a[0])
		}),
		verb("list", []string{"ls"}, "list the metadata", "IMAGE", 1, true, func(ctx context.Context, img *rbd.Image, _ []string) error {
			kvs, err := img.MetadataList(ctx)
			if err != nil {
				return err
			}
			for _, k := range slices.Sorted(maps.Keys(kvs)) {
				fmt.Fprintf(c.stdout, "%s\t%s\n", k, kvs[k])
			}
			return nil
		}),
	)
}
