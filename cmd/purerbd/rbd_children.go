package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd children`: the clones of a snapshot (of every snapshot
// when the spec names none), and with --descendants their clones too,
// sorted and printed as rbd children prints them.

func (c *rbdCommand) childrenCommand() *cli.Command {
	var (
		all, descendants bool
		out              outputFormat
	)
	cmd := &cli.Command{
		Name: "children", Summary: "list the clones of a snapshot", Args: "IMAGE[@SNAP]", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return c.children(ctx, inv.Args[0], all, descendants, &out)
		},
	}
	cmd.Bool(&all, "-a, --all", "also list the clones in the trash")
	cmd.Bool(&descendants, "--descendants", "also list the clones of the clones, all the way down")
	out.register(cmd)
	return cmd
}

// linkedImage is a clone with its pool's name, as librbd's
// linked_image_spec_t.
type linkedImage struct {
	rbd.LinkedImage
	poolName string
}

func (c *rbdCommand) children(ctx context.Context, spec string, all, descendants bool, out *outputFormat) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	snap := sp.snap
	sp.snap = ""
	depth := 1
	if descendants {
		depth = 0
	}
	var found []rbd.LinkedImage
	err = c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: true}, func(img *rbd.Image) error {
		found, err = img.Descendants(ctx, snap, depth)
		return err
	})
	if err != nil {
		return rbdFailure(c.stderr, "children", err)
	}
	names := c.radosConn.OSDMap().PoolNames
	images := make([]linkedImage, len(found))
	for i, f := range found {
		images[i] = linkedImage{LinkedImage: f, poolName: names[f.PoolID]}
	}
	// librbd's order: pool name, pool id, namespace, image name, id
	sort.SliceStable(images, func(i, j int) bool {
		a, b := images[i], images[j]
		switch {
		case a.poolName != b.poolName:
			return a.poolName < b.poolName
		case a.PoolID != b.PoolID:
			return a.PoolID < b.PoolID
		case a.PoolNamespace != b.PoolNamespace:
			return a.PoolNamespace < b.PoolNamespace
		case a.Name != b.Name:
			return a.Name < b.Name
		}
		return a.ID < b.ID
	})
	if out.json() {
		type child struct {
			Pool          string  `json:"pool"`
			PoolNamespace string  `json:"pool_namespace"`
			Image         string  `json:"image"`
			ID            *string `json:"id,omitempty"`
			Trash         *bool   `json:"trash,omitempty"`
		}
		rows := []child{}
		for _, im := range images {
			r := child{Pool: im.poolName, PoolNamespace: im.PoolNamespace, Image: im.Name}
			switch {
			case all:
				r.ID, r.Trash = &im.ID, &im.Trash
			case im.Trash:
				continue
			}
			rows = append(rows, r)
		}
		return out.writeJSON(c.stdout, rows)
	}
	var b strings.Builder
	for _, im := range images {
		if im.Trash && !all {
			continue
		}
		if im.poolName == "" {
			fmt.Fprintf(&b, "(child missing %d/", im.PoolID)
		} else {
			b.WriteString(im.poolName + "/")
		}
		if im.PoolNamespace != "" {
			b.WriteString(im.PoolNamespace + "/")
		}
		switch {
		case im.Name == "":
			b.WriteString(im.ID + ")")
		case im.Trash:
			fmt.Fprintf(&b, "%s (trash %s)", im.Name, im.ID)
		default:
			b.WriteString(im.Name)
		}
		b.WriteByte('\n')
	}
	_, err = fmt.Fprint(c.stdout, b.String())
	return err
}
