package main

import (
	"context"
	"fmt"
	"sort"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd du`: provisioned and used bytes of images and their
// snapshots, as `rbd du` computes them: what each snapshot (oldest
// first) and the head changed since the snapshot before, by whole
// objects (fast-diff answers from the object maps) or, with --exact, by
// bytes.

func (c *rbdCommand) duCommand() *cli.Command {
	var (
		o   duOptions
		out outputFormat
	)
	cmd := &cli.Command{
		Name: "du", Aliases: []string{"disk-usage"}, Summary: "show the disk usage of a pool's images, an image or a snapshot",
		Args: "[IMAGE[@SNAP]]", MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			spec := ""
			if len(inv.Args) == 1 {
				spec = inv.Args[0]
			}
			return c.du(ctx, spec, o, &out)
		},
	}
	cmd.String(&o.fromSnap, "--from-snap SNAP", "snapshot starting point")
	cmd.Bool(&o.exact, "--exact", "compute the exact disk usage (slow)")
	cmd.Bool(&o.merge, "--merge-snapshots", "merge snapshot sizes with their image")
	out.register(cmd)
	return cmd
}

type duOptions struct {
	fromSnap     string
	exact, merge bool
}

// duImage is one row of rbd du --format json.
type duImage struct {
	Name        string  `json:"name"`
	ID          string  `json:"id"`
	Snapshot    string  `json:"snapshot,omitempty"`
	SnapshotID  *uint64 `json:"snapshot_id,omitempty"`
	Provisioned uint64  `json:"provisioned_size"`
	Used        uint64  `json:"used_size"`
}

func (c *rbdCommand) du(ctx context.Context, spec string, o duOptions, out *outputFormat) error {
	sp := imageSpec{pool: c.pool, ns: c.ns}
	if spec == "" && o.fromSnap != "" {
		return cli.Usagef(cli.MissingArgument, "du: --from-snap needs an image")
	}
	if spec != "" {
		var err error
		if sp, err = c.parseSpec(spec, false); err != nil {
			return err
		}
	}
	var (
		rows                []duImage
		totalProv, totalUse uint64
		count               int
	)
	err := c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		images, err := rbd.List(ctx, ioc)
		if err != nil {
			return err
		}
		found := false
		for _, im := range images {
			if sp.name != "" && im.Name != sp.name {
				continue
			}
			found = true
			r, prov, used, n, err := c.duOne(ctx, ioc, im, sp.snap, sp.name != "", o)
			if err != nil {
				return err
			}
			rows = append(rows, r...)
			totalProv += prov
			totalUse += used
			count += n
		}
		if sp.name != "" && !found {
			return fmt.Errorf("%w: specified image %s is not found", rbd.ErrNotFound, sp.name)
		}
		return nil
	})
	if err != nil {
		return rbdFailure(c.stderr, "du", err)
	}
	if out.json() {
		v := struct {
			Images    []duImage `json:"images"`
			TotalProv *uint64   `json:"total_provisioned_size,omitempty"`
			TotalUsed *uint64   `json:"total_used_size,omitempty"`
		}{Images: rows}
		if v.Images == nil {
			v.Images = []duImage{}
		}
		if sp.name == "" {
			v.TotalProv, v.TotalUsed = &totalProv, &totalUse
		}
		return out.writeJSON(c.stdout, v)
	}
	if len(rows) == 0 && sp.name == "" {
		return nil
	}
	t := &textTable{headers: []string{"NAME", "PROVISIONED", "USED"}, right: []bool{false, true, true}}
	for _, r := range rows {
		name := r.Name
		if r.Snapshot != "" {
			name += "@" + r.Snapshot
		}
		t.add(name, humanBytes(r.Provisioned), humanBytes(r.Used))
	}
	if count > 1 {
		t.add("<TOTAL>", humanBytes(totalProv), humanBytes(totalUse))
	}
	return t.write(c.stdout)
}

// duOne is rbd du's loop over one image: its user snapshots oldest
// first (from the one after fromSnap, when an image was named; up to
// snap, if given), then the head unless a snapshot was named. It
// returns the rows, the provisioned and used bytes for the totals, and
// how many rows count towards them.
func (c *rbdCommand) duOne(ctx context.Context, ioc *rados.IOContext, im rbd.ImageEntry, snap string, named bool,
	o duOptions) (rows []duImage, prov, used uint64, count int, err error) {
	img, err := rbd.Open(ctx, ioc, im.Name, rbd.OpenOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, 0, 0, err
	}
	defer img.Close()
	all, err := img.Snapshots(ctx)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	var snaps []rbd.SnapInfo
	for _, s := range all {
		if s.Namespace == rbd.SnapNamespaceUser {
			snaps = append(snaps, s)
		}
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].ID < snaps[j].ID })
	var snapID, fromID uint64
	for _, s := range snaps {
		if s.Name == snap {
			snapID = s.ID
		}
		if s.Name == o.fromSnap {
			fromID = s.ID
		}
	}
	if (snap != "" && snapID == 0) || (o.fromSnap != "" && fromID == 0) {
		return nil, 0, 0, 0, fmt.Errorf("%w: specified snapshot is not found", rbd.ErrNotFound)
	}
	if snapID != 0 && fromID != 0 {
		if fromID == snapID {
			return nil, 0, 0, 0, nil
		}
		if fromID > snapID {
			return nil, 0, 0, 0, fmt.Errorf("%w: --from-snap is newer than the snapshot", rbd.ErrInvalid)
		}
	}
	usage := func(view *rbd.Image, from string) (uint64, error) {
		var n uint64
		opts := rbd.DiffOptions{FromSnap: from, WholeObject: !o.exact}
		err := view.Diff(ctx, 0, view.Size(), opts, func(_, length int64, exists bool) error {
			if exists {
				n += uint64(length)
			}
			return nil
		})
		return n, err
	}
	foundFrom := o.fromSnap == ""
	last := ""
	var full uint64
	for _, s := range snaps {
		if !named || foundFrom {
			sv, err := rbd.Open(ctx, ioc, im.Name, rbd.OpenOptions{ReadOnly: true, Snapshot: s.Name})
			if err != nil {
				return nil, 0, 0, 0, err
			}
			u, err := usage(sv, last)
			_ = sv.Close()
			if err != nil {
				return nil, 0, 0, 0, err
			}
			if !o.merge {
				id := s.ID
				rows = append(rows, duImage{Name: im.Name, ID: im.ID, Snapshot: s.Name, SnapshotID: &id,
					Provisioned: uint64(s.Size), Used: u})
			}
			full += u
			if snap != "" {
				prov += uint64(s.Size)
			}
			used += u
			count++
		}
		if !foundFrom && s.Name == o.fromSnap {
			foundFrom = true
		}
		if snap != "" && s.Name == snap {
			break
		}
		last = s.Name
	}
	if snap == "" {
		u, err := usage(img, last)
		if err != nil {
			return nil, 0, 0, 0, err
		}
		full += u
		row := duImage{Name: im.Name, ID: im.ID, Provisioned: uint64(img.Size()), Used: u}
		if o.merge {
			row.Used = full
		}
		rows = append(rows, row)
		prov += uint64(img.Size())
		used += u
		count++
	}
	return rows, prov, used, count, nil
}
