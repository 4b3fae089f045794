package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd info`, with `rbd info --format json`'s keys.

// infoJSON mirrors `rbd info --format json`.
type infoJSON struct {
	Name            string     `json:"name"`
	ID              string     `json:"id"`
	Size            uint64     `json:"size"`
	Objects         uint64     `json:"objects"`
	Order           uint8      `json:"order"`
	ObjectSize      uint64     `json:"object_size"`
	SnapshotCount   int        `json:"snapshot_count"`
	BlockNamePrefix string     `json:"block_name_prefix"`
	Format          int        `json:"format"`
	Features        []string   `json:"features"`
	OpFeatures      []string   `json:"op_features"`
	Flags           []string   `json:"flags"`
	Group           string     `json:"group,omitempty"`
	StripeUnit      uint64     `json:"stripe_unit,omitempty"`
	StripeCount     uint64     `json:"stripe_count,omitempty"`
	DataPool        string     `json:"data_pool,omitempty"`
	CreateTimestamp string     `json:"create_timestamp,omitempty"`
	Parent          *parentOut `json:"parent,omitempty"`
	Protected       string     `json:"protected,omitempty"`
}

// parentOut is rbd info's parent section.
type parentOut struct {
	Pool          string `json:"pool"`
	PoolNamespace string `json:"pool_namespace"`
	Image         string `json:"image"`
	ImageID       string `json:"id"`
	Snapshot      string `json:"snapshot"`
	Trash         bool   `json:"trash"`
	Overlap       uint64 `json:"overlap"`
}

func opFeatureNames(f uint64) []string {
	names := []string{}
	for _, n := range []struct {
		bit  uint64
		name string
	}{{rbd.OpFeatureCloneParent, "clone-parent"}, {rbd.OpFeatureCloneChild, "clone-child"},
		{rbd.OpFeatureGroup, "group"}, {rbd.OpFeatureSnapTrash, "snap-trash"}} {
		if f&n.bit != 0 {
			names = append(names, n.name)
		}
	}
	return names
}

func flagNames(f uint64) []string {
	names := []string{}
	if f&rbd.FlagObjectMapInvalid != 0 {
		names = append(names, "object map invalid")
	}
	if f&rbd.FlagFastDiffInvalid != 0 {
		names = append(names, "fast diff invalid")
	}
	return names
}

func (c *rbdCommand) infoCommand() *cli.Command {
	var format string
	cmd := &cli.Command{
		Name: "info", Summary: "show an image's (or a snapshot's) size, layout, features and parent",
		Args: "IMAGE[@SNAP]", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error { return c.info(ctx, inv.Args[0], format) },
	}
	formatOption(cmd, &format)
	return cmd
}

func (c *rbdCommand) info(ctx context.Context, spec, format string) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: true, Snapshot: sp.snap}, func(img *rbd.Image) error {
		info, err := img.Stat(ctx)
		if err != nil {
			return err
		}
		out := infoJSON{
			Name: info.Name, ID: info.ID, Size: uint64(info.Size), Objects: info.NumObjects, Order: info.Order,
			ObjectSize: info.ObjectSize, SnapshotCount: len(info.Snapshots), BlockNamePrefix: info.BlockNamePrefix,
			Format: 2, Features: info.Features.Names(), OpFeatures: opFeatureNames(info.OpFeatures),
			Flags: flagNames(info.Flags),
		}
		if out.Features == nil {
			out.Features = []string{}
		}
		if g, ok, err := img.Group(ctx); err != nil {
			return err
		} else if ok {
			// as rbd: POOL/[NAMESPACE/]GROUP, the namespace the image's
			pool, found := c.radosConn.OSDMap().PoolNames[g.PoolID]
			if !found {
				pool = fmt.Sprintf("<missing group pool %d>", g.PoolID)
			}
			out.Group = pool + "/"
			if sp.ns != "" {
				out.Group += sp.ns + "/"
			}
			out.Group += g.Name
		}
		if info.Features&rbd.FeatureStripingV2 != 0 {
			out.StripeUnit, out.StripeCount = info.StripeUnit, info.StripeCount
		}
		if info.DataPoolID >= 0 {
			out.DataPool = strconv.FormatInt(info.DataPoolID, 10)
		}
		if !info.CreateTimestamp.IsZero() {
			out.CreateTimestamp = time.Unix(info.CreateTimestamp.Unix(), 0).Format(time.ANSIC)
		}
		if info.Parent != nil {
			names, err := img.ParentNames(ctx)
			if err != nil {
				return err
			}
			out.Parent = &parentOut{Pool: c.radosConn.OSDMap().PoolNames[info.Parent.PoolID],
				PoolNamespace: info.Parent.PoolNamespace, Image: names.Image, ImageID: info.Parent.ImageID,
				Snapshot: names.Snapshot, Trash: names.Trash, Overlap: uint64(info.ParentOverlap)}
		}
		if sp.snap != "" {
			for _, s := range info.Snapshots {
				if s.Name == sp.snap {
					out.Protected = strconv.FormatBool(s.Protected)
				}
			}
		}
		if format == "json" {
			return json.NewEncoder(c.stdout).Encode(out)
		}
		w := c.stdout
		fmt.Fprintf(w, "rbd image '%s':\n", out.Name)
		fmt.Fprintf(w, "\tsize %s in %d objects\n", humanBytes(out.Size), out.Objects)
		fmt.Fprintf(w, "\torder %d (%s objects)\n", out.Order, humanBytes(out.ObjectSize))
		fmt.Fprintf(w, "\tsnapshot_count: %d\n", out.SnapshotCount)
		fmt.Fprintf(w, "\tid: %s\n", out.ID)
		if out.DataPool != "" {
			fmt.Fprintf(w, "\tdata_pool: %s\n", out.DataPool)
		}
		fmt.Fprintf(w, "\tblock_name_prefix: %s\n", out.BlockNamePrefix)
		fmt.Fprintf(w, "\tformat: 2\n")
		fmt.Fprintf(w, "\tfeatures: %s\n", strings.Join(out.Features, ", "))
		fmt.Fprintf(w, "\top_features: %s\n", strings.Join(out.OpFeatures, ", "))
		fmt.Fprintf(w, "\tflags: %s\n", strings.Join(out.Flags, ", "))
		if out.Group != "" {
			fmt.Fprintf(w, "\tgroup: %s\n", out.Group)
		}
		if out.CreateTimestamp != "" {
			fmt.Fprintf(w, "\tcreate_timestamp: %s\n", out.CreateTimestamp)
		}
		if out.StripeUnit != 0 {
			fmt.Fprintf(w, "\tstripe unit: %s\n\tstripe count: %d\n", humanBytes(out.StripeUnit), out.StripeCount)
		}
		if p := out.Parent; p != nil {
			fmt.Fprintf(w, "\tparent: %s/", p.Pool)
			if p.PoolNamespace != "" {
				fmt.Fprintf(w, "%s/", p.PoolNamespace)
			}
			fmt.Fprintf(w, "%s@%s", p.Image, p.Snapshot)
			if p.Trash {
				fmt.Fprintf(w, " (trash %s)", p.ImageID)
			}
			fmt.Fprintf(w, "\n\toverlap: %s\n", humanBytes(p.Overlap))
		}
		if out.Protected != "" {
			fmt.Fprintf(w, "\tprotected: %s\n", out.Protected)
		}
		return nil
	})
}
