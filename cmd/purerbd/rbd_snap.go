package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd snap`: list, create, remove, protect, unprotect and roll
// back snapshots.

func (c *rbdCommand) snapCommand() *cli.Command {
	var format string
	var all bool
	ls := &cli.Command{
		Name: "ls", Aliases: []string{"list"}, Summary: "list an image's snapshots", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error { return c.snapList(ctx, inv.Args[0], format, all) },
	}
	formatOption(ls, &format)
	ls.Bool(&all, "--all", "also list snapshots of other namespaces (trash, mirror, group)")
	// verb is a verb on one snapshot, IMAGE@SNAP: f is the rbd.Image
	// method doing it
	verb := func(name string, aliases []string, summary string, f func(*rbd.Image, context.Context, string) error) *cli.Command {
		return &cli.Command{
			Name: name, Aliases: aliases, Summary: summary, Args: "IMAGE@SNAP", MinArgs: 1, MaxArgs: 1,
			Run: func(ctx context.Context, inv *cli.Invocation) error {
				sp, err := c.parseSpec(inv.Args[0], true)
				if err != nil {
					return err
				}
				snap := sp.snap
				sp.snap = ""
				return c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error { return f(img, ctx, snap) })
			},
		}
	}
	group := &cli.Command{Name: "snap", Summary: "snapshots: ls, create, rm, protect, unprotect, rollback, rename, purge, limit"}
	return group.Add(
		ls,
		verb("create", []string{"add"}, "create a snapshot", (*rbd.Image).CreateSnapshot),
		verb("rm", []string{"remove"}, "remove a snapshot", (*rbd.Image).RemoveSnapshot),
		verb("protect", nil, "protect a snapshot from removal, so that it can be cloned", (*rbd.Image).ProtectSnapshot),
		verb("unprotect", nil, "let a snapshot be removed again", (*rbd.Image).UnprotectSnapshot),
		verb("rollback", []string{"revert"}, "roll the image back to a snapshot", (*rbd.Image).RollbackSnapshot),
		c.snapRenameCommand(),
		c.snapPurgeCommand(),
		c.snapLimitCommand(),
	)
}

// snapList lists an image's snapshots as rbd snap ls does.
func (c *rbdCommand) snapList(ctx context.Context, spec, format string, all bool) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: true}, func(img *rbd.Image) error {
		snaps, err := img.Snapshots(ctx)
		if err != nil {
			return err
		}
		sort.Slice(snaps, func(i, j int) bool { return snaps[i].ID < snaps[j].ID })
		type row struct {
			ID        uint64 `json:"id"`
			Name      string `json:"name"`
			Size      uint64 `json:"size"`
			Protected string `json:"protected"`
			Timestamp string `json:"timestamp"`
		}
		rows := []row{}
		for _, s := range snaps {
			if s.Namespace != rbd.SnapNamespaceUser && !all {
				continue
			}
			ts := "" // as rbd prints a snapshot without a recorded time
			if !s.Timestamp.IsZero() {
				ts = time.Unix(s.Timestamp.Unix(), 0).Format(time.ANSIC)
			}
			rows = append(rows, row{ID: s.ID, Name: s.Name, Size: uint64(s.Size), Protected: strconv.FormatBool(s.Protected),
				Timestamp: ts})
		}
		if format == "json" {
			return json.NewEncoder(c.stdout).Encode(rows)
		}
		if len(rows) == 0 {
			return nil
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "SNAPID\tNAME\tSIZE\tPROTECTED\tTIMESTAMP")
		for _, r := range rows {
			prot := ""
			if r.Protected == "true" {
				prot = "yes"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.ID, r.Name, humanBytes(r.Size), prot, r.Timestamp)
		}
		return tw.Flush()
	})
}
