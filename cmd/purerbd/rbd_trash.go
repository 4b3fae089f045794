package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd trash ls`: the images a pool's (or namespace's) trash
// holds, as rbd trash ls lists them. Moving images into the trash and
// out of it (mv, restore, rm, purge) is left to Ceph's rbd: those verbs
// are refused, saying so.

func (c *rbdCommand) trashCommand() *cli.Command {
	var (
		all, long bool
		out       outputFormat
	)
	ls := &cli.Command{
		Name: "ls", Aliases: []string{"list"}, Summary: "list the images in a pool's trash", Args: "[POOL[/NAMESPACE]]",
		MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return c.trashList(ctx, inv.Args, all, long, &out)
		},
	}
	ls.Bool(&all, "-a, --all", "also list the images other than users put there (being removed, migrated, mirrored)")
	ls.Bool(&long, "-l, --long", "long listing: source, times, parent")
	out.register(ls)
	refused := func(name string, aliases []string, summary string) *cli.Command {
		return &cli.Command{
			Name: name, Aliases: aliases, Summary: summary + " (not implemented: use Ceph's rbd)", Args: "ARGS...",
			MaxArgs: cli.Unlimited,
			Run: func(context.Context, *cli.Invocation) error {
				return fmt.Errorf("rbd trash %s is not implemented by purerbd, which only lists the trash: use Ceph's rbd", name)
			},
		}
	}
	group := &cli.Command{Name: "trash", Summary: "the image trash: ls (mv, restore, rm and purge are Ceph rbd's)"}
	return group.Add(ls,
		refused("mv", []string{"move"}, "move an image to the trash"),
		refused("restore", nil, "restore an image from the trash"),
		refused("rm", []string{"remove"}, "remove an image from the trash"),
		refused("purge", nil, "remove the expired images from the trash"),
	)
}

func (c *rbdCommand) trashList(ctx context.Context, args []string, all, long bool, out *outputFormat) error {
	sp, err := c.parsePoolSpec(args)
	if err != nil {
		return err
	}
	err = c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		entries, err := rbd.TrashList(ctx, ioc)
		if err != nil {
			return err
		}
		var rows []trashRow
		for _, e := range entries {
			// rbd lists what users put there; --all what librbd lists,
			// which leaves out the images it is removing
			if e.Source == rbd.TrashSourceRemoving || !all && e.Source != rbd.TrashSourceUser {
				continue
			}
			r := trashRow{ID: e.ID, Name: e.Name}
			if long {
				if err := c.trashDetails(ctx, ioc, e, &r); err != nil {
					return err
				}
			}
			rows = append(rows, r)
		}
		return c.printTrash(rows, long, out)
	})
	if err != nil {
		return rbdFailure(c.stderr, "trash ls", err)
	}
	return nil
}

// trashRow is one image of rbd trash ls, with --format json's keys.
type trashRow struct {
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	Source    string       `json:"source,omitempty"`
	DeletedAt string       `json:"deleted_at,omitempty"`
	Status    string       `json:"status,omitempty"`
	Parent    *trashParent `json:"parent,omitempty"`
}

type trashParent struct {
	Pool          string `json:"pool"`
	PoolNamespace string `json:"pool_namespace"`
	Image         string `json:"image"`
	Snapshot      string `json:"snapshot"`
}

// trashDetails fills in what rbd trash ls --long shows of an entry: its
// source, when it was deleted, until when it is kept, and its parent.
func (c *rbdCommand) trashDetails(ctx context.Context, ioc *rados.IOContext, e rbd.TrashEntry, r *trashRow) error {
	r.Source = strings.ToUpper(e.Source.String())
	r.DeletedAt = e.DeletionTime.Local().Format(time.ANSIC)
	end := e.DefermentEnd.Local().Format(time.ANSIC)
	if e.DefermentEnd.After(time.Now()) {
		r.Status = "protected until " + end
	} else {
		r.Status = "expired at " + end
	}
	img, err := rbd.OpenByID(ctx, ioc, e.ID, rbd.OpenOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer img.Close()
	p, _ := img.Parent()
	if p == nil {
		return nil
	}
	names, err := img.ParentNames(ctx)
	if err != nil {
		return err
	}
	r.Parent = &trashParent{Pool: c.radosConn.OSDMap().PoolNames[p.PoolID], PoolNamespace: p.PoolNamespace,
		Image: names.Image, Snapshot: names.Snapshot}
	return nil
}

func (c *rbdCommand) printTrash(rows []trashRow, long bool, out *outputFormat) error {
	if out.json() {
		if rows == nil {
			rows = []trashRow{}
		}
		return out.writeJSON(c.stdout, rows)
	}
	if !long {
		for _, r := range rows {
			fmt.Fprintf(c.stdout, "%s %s\n", r.ID, r.Name)
		}
		return nil
	}
	if len(rows) == 0 {
		return nil
	}
	t := &textTable{headers: []string{"ID", "NAME", "SOURCE", "DELETED_AT", "STATUS", "PARENT"}, right: make([]bool, 6)}
	for _, r := range rows {
		parent := ""
		if p := r.Parent; p != nil {
			parent = p.Pool + "/"
			if p.PoolNamespace != "" {
				parent += p.PoolNamespace + "/"
			}
			parent += p.Image + "@" + p.Snapshot
		}
		t.add(r.ID, r.Name, r.Source, r.DeletedAt, r.Status, parent)
	}
	return t.write(c.stdout)
}
