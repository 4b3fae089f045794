package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd ls`.

func (c *rbdCommand) listCommand() *cli.Command {
	var format string
	var long bool
	cmd := &cli.Command{
		Name: "ls", Aliases: []string{"list"}, Summary: "list the images of a pool (or namespace)",
		Args: "[POOL[/NAMESPACE]]", MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error { return c.list(ctx, inv.Args, long, format) },
	}
	cmd.Bool(&long, "-l, --long", "long listing: size and format too")
	formatOption(cmd, &format)
	return cmd
}

func (c *rbdCommand) list(ctx context.Context, pos []string, long bool, format string) error {
	sp := imageSpec{pool: c.pool, ns: c.ns}
	if len(pos) == 1 {
		p, ns, _ := strings.Cut(pos[0], "/")
		sp.pool, sp.ns = p, ns
	}
	return c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		images, err := rbd.List(ctx, ioc)
		if err != nil {
			return err
		}
		if !long {
			if format == "json" {
				names := []string{}
				for _, im := range images {
					names = append(names, im.Name)
				}
				return json.NewEncoder(c.stdout).Encode(names)
			}
			for _, im := range images {
				fmt.Fprintln(c.stdout, im.Name)
			}
			return nil
		}
		type row struct {
			Image  string `json:"image"`
			ID     string `json:"id"`
			Size   uint64 `json:"size"`
			Format int    `json:"format"`
		}
		rows := []row{}
		for _, im := range images {
			img, err := rbd.Open(ctx, ioc, im.Name, rbd.OpenOptions{ReadOnly: true})
			if err != nil {
				fmt.Fprintf(c.stderr, "purerbd rbd: %s: %v\n", im.Name, err)
				continue
			}
			rows = append(rows, row{Image: im.Name, ID: im.ID, Size: uint64(img.Size()), Format: 2})
			_ = img.Close()
		}
		if format == "json" {
			return json.NewEncoder(c.stdout).Encode(rows)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSIZE\tPARENT\tFMT\tPROT\tLOCK")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t\t2\t\t\n", r.Image, humanBytes(r.Size))
		}
		return tw.Flush()
	})
}
