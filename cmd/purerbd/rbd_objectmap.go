package main

import (
	"context"
	"fmt"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd object-map check|rebuild IMAGE[@SNAP]`: verify an object
// map against the data objects that exist, or rewrite it from them, as
// rbd does. A check that finds the map wrong flags it invalid (rbd info
// shows "object map invalid") and still exits 0, as rbd's does.

func (c *rbdCommand) objectMapCommand() *cli.Command {
	verb := func(name, summary, label, failure string, run func(ctx context.Context, img *rbd.Image, pr *progress) error) *cli.Command {
		var noProgress bool
		cmd := &cli.Command{
			Name: name, Summary: summary, Args: "IMAGE[@SNAP]", MinArgs: 1, MaxArgs: 1,
			Run: func(ctx context.Context, inv *cli.Invocation) error {
				sp, err := c.parseSpec(inv.Args[0], false)
				if err != nil {
					return err
				}
				pr := newProgress(c.stderr, label, noProgress)
				err = c.withImage(ctx, sp, rbd.OpenOptions{Snapshot: sp.snap, ObjectMapRepair: true}, func(img *rbd.Image) error {
					return run(ctx, img, pr)
				})
				pr.finish(err)
				if err != nil {
					fmt.Fprintf(c.stderr, "rbd: %s failed: %v\n", failure, err)
					return cli.ExitStatus(errnoOf(err))
				}
				return nil
			},
		}
		noProgressOption(cmd, &noProgress)
		return cmd
	}
	group := &cli.Command{Name: "object-map", Summary: "verify or rebuild object maps: check, rebuild"}
	return group.Add(
		verb("check", "verify the object map is correct", "Object Map Check", "checking object map",
			func(ctx context.Context, img *rbd.Image, pr *progress) error {
				_, err := img.CheckObjectMap(ctx, pr.update)
				return err
			}),
		verb("rebuild", "rebuild an invalid object map", "Object Map Rebuild", "rebuilding object map",
			func(ctx context.Context, img *rbd.Image, pr *progress) error {
				return img.RebuildObjectMap(ctx, pr.update)
			}),
	)
}
