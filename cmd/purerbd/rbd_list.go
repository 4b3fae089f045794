package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd ls`.

func (c *rbdCommand) listCommand() *cli.Command {
	var of outputFormat
	var long bool
	cmd := &cli.Command{
		Name: "ls", Aliases: []string{"list"}, Summary: "list the images of a pool (or namespace)",
		Args: "[POOL[/NAMESPACE]]", MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error { return c.list(ctx, inv.Args, long, of) },
	}
	cmd.Bool(&long, "-l, --long", "long listing: size, parent, format, protection and lock, and the snapshots")
	of.register(cmd)
	return cmd
}

func (c *rbdCommand) list(ctx context.Context, pos []string, long bool, of outputFormat) error {
	sp := imageSpec{pool: c.pool, ns: c.ns}
	if len(pos) == 1 {
		p, ns, _ := strings.Cut(pos[0], "/")
		sp.pool, sp.ns = p, ns
	}
	err := c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		images, err := rbd.List(ctx, ioc)
		if err != nil {
			return err
		}
		if !long {
			if of.json() {
				names := []string{}
				for _, im := range images {
					names = append(names, im.Name)
				}
				return of.writeJSON(c.stdout, names)
			}
			for _, im := range images {
				fmt.Fprintln(c.stdout, im.Name)
			}
			return nil
		}
		t := &textTable{headers: []string{"NAME", "SIZE", "PARENT", "FMT", "PROT", "LOCK"}, right: []bool{false, true, false, true, false, false}}
		rows := []longRow{}
		for _, im := range images {
			rs, err := c.longRows(ctx, ioc, im.Name)
			if err != nil {
				if !errors.Is(err, rbd.ErrNotFound) {
					fmt.Fprintf(c.stderr, "rbd: error opening %s: %v\n", im.Name, err)
				}
				continue // gone since the listing, as rbd skips it
			}
			rows = append(rows, rs...)
		}
		if of.json() {
			return of.writeJSON(c.stdout, rows)
		}
		if len(images) == 0 {
			return nil
		}
		for _, r := range rows {
			name, parent, prot := r.Image, "", ""
			if r.Snapshot != "" {
				name += "@" + r.Snapshot
				if *r.Protected == "true" {
					prot = "yes"
				}
			}
			if p := r.Parent; p != nil {
				parent = p.Pool + "/"
				if p.PoolNamespace != "" {
					parent += p.PoolNamespace + "/"
				}
				parent += p.Image + "@" + p.Snapshot
			}
			lock := map[string]string{"exclusive": "excl", "shared": "shr"}[r.LockType]
			t.add(name, humanBytes(r.Size), parent, strconv.Itoa(r.Format), prot, lock)
		}
		return t.write(c.stdout)
	})
	if errors.Is(err, rados.ErrPoolNotFound) || errors.Is(err, rbd.ErrNotFound) {
		// what rbd says and exits with; a cluster that cannot be reached
		// fails as every verb does
		fmt.Fprintf(c.stderr, "rbd: listing images failed: %v\n", err)
		return cli.ExitStatus(errnoOf(err))
	}
	return err
}

// longRow is one image or snapshot of `rbd ls -l --format json`, with
// rbd's keys.
type longRow struct {
	Image      string         `json:"image"`
	ID         string         `json:"id"`
	Snapshot   string         `json:"snapshot,omitempty"`
	SnapshotID *uint64        `json:"snapshot_id,omitempty"`
	Size       uint64         `json:"size"`
	Parent     *longRowParent `json:"parent,omitempty"`
	Format     int            `json:"format"`
	Protected  *string        `json:"protected,omitempty"`
	LockType   string         `json:"lock_type,omitempty"`
}

type longRowParent struct {
	Pool          string `json:"pool"`
	PoolNamespace string `json:"pool_namespace"`
	Image         string `json:"image"`
	Snapshot      string `json:"snapshot"`
}

// longRows are the rows of rbd ls -l for one image: the image (its
// parent and the kind of lock on it) and each of its user snapshots (its
// parent then, whether protected).
func (c *rbdCommand) longRows(ctx context.Context, ioc *rados.IOContext, name string) ([]longRow, error) {
	img, err := rbd.Open(ctx, ioc, name, rbd.OpenOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer img.Close()
	parent := func(img *rbd.Image) (*longRowParent, error) {
		p, _ := img.Parent()
		if p == nil {
			return nil, nil
		}
		names, err := img.ParentNames(ctx)
		if err != nil {
			return nil, err
		}
		return &longRowParent{Pool: c.radosConn.OSDMap().PoolNames[p.PoolID], PoolNamespace: p.PoolNamespace,
			Image: names.Image, Snapshot: names.Snapshot}, nil
	}
	row := longRow{Image: name, ID: img.ID(), Size: uint64(img.Size()), Format: 2}
	if row.Parent, err = parent(img); err != nil {
		return nil, err
	}
	owners, err := img.LockOwners(ctx)
	if err != nil {
		return nil, err
	}
	if len(owners) > 0 {
		shared, _, err := img.LockShared(ctx)
		if err != nil {
			return nil, err
		}
		row.LockType = map[bool]string{false: "exclusive", true: "shared"}[shared]
	}
	rows := []longRow{row}
	snaps, err := img.Snapshots(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(snaps, func(a, b rbd.SnapInfo) int { return cmp.Compare(a.ID, b.ID) })
	for _, sn := range snaps {
		if sn.Namespace != rbd.SnapNamespaceUser {
			continue
		}
		prot := strconv.FormatBool(sn.Protected)
		id := sn.ID
		r := longRow{Image: name, ID: img.ID(), Snapshot: sn.Name, SnapshotID: &id, Size: uint64(sn.Size), Format: 2, Protected: &prot}
		at, err := rbd.Open(ctx, ioc, name, rbd.OpenOptions{ReadOnly: true, Snapshot: sn.Name})
		if err != nil {
			return nil, err
		}
		r.Parent, err = parent(at)
		_ = at.Close()
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}
