package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd diff`: the extents that changed since a snapshot or the
// image's creation, as `rbd diff` lists them.

func (c *rbdCommand) diffCommand() *cli.Command {
	var (
		fromSnap string
		whole    bool
		out      outputFormat
	)
	cmd := &cli.Command{
		Name: "diff", Summary: "print the extents that differ since a snapshot, or the image's creation",
		Args: "IMAGE[@SNAP]", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return c.diff(ctx, inv.Args[0], fromSnap, whole, &out)
		},
	}
	cmd.String(&fromSnap, "--from-snap SNAP", "snapshot starting point")
	cmd.Bool(&whole, "--whole-object", "compare whole objects")
	out.register(cmd)
	return cmd
}

// diffExtent is one line of `rbd diff`; exists is "true" or "false" in
// rbd's JSON.
type diffExtent struct {
	Offset uint64 `json:"offset"`
	Length uint64 `json:"length"`
	Exists string `json:"exists"`
}

func (c *rbdCommand) diff(ctx context.Context, spec, fromSnap string, whole bool, out *outputFormat) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	extents := []diffExtent{}
	err = c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: true, Snapshot: sp.snap}, func(img *rbd.Image) error {
		opts := rbd.DiffOptions{FromSnap: fromSnap, WholeObject: whole, IncludeParent: true}
		return img.Diff(ctx, 0, img.Size(), opts, func(off, length int64, exists bool) error {
			extents = append(extents, diffExtent{uint64(off), uint64(length), fmt.Sprint(exists)})
			return nil
		})
	})
	if err != nil {
		return rbdFailure(c.stderr, "diff", err)
	}
	if out.json() {
		return out.writeJSON(c.stdout, extents)
	}
	if len(extents) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "Offset\tLength\tType")
	for _, e := range extents {
		typ := "data"
		if e.Exists != "true" {
			typ = "zero"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\n", e.Offset, e.Length, typ)
	}
	return tw.Flush()
}
