package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
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
		// namespace is what --all adds: a JSON object, and its text
		type namespace struct {
			Type         string `json:"type"`
			Pool         string `json:"pool,omitempty"`
			Group        string `json:"group,omitempty"`
			GroupSnap    string `json:"group snap,omitempty"`
			OriginalName string `json:"original_name,omitempty"`
			text         string
		}
		type row struct {
			ID        uint64     `json:"id"`
			Name      string     `json:"name"`
			Size      uint64     `json:"size"`
			Protected string     `json:"protected"`
			Timestamp string     `json:"timestamp"`
			Namespace *namespace `json:"namespace,omitempty"`
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
			r := row{ID: s.ID, Name: s.Name, Size: uint64(s.Size), Protected: strconv.FormatBool(s.Protected), Timestamp: ts}
			if all {
				ns := &namespace{Type: s.Namespace.String()}
				ns.text = ns.Type
				switch {
				case s.Group != nil:
					// as rbd: the bare type when the group cannot be read
					if g, gs, err := img.GroupSnapshotOf(ctx, s); err == nil {
						ns.Pool, ns.Group, ns.GroupSnap = c.radosConn.OSDMap().PoolNames[s.Group.PoolID], g, gs
						ns.text = fmt.Sprintf("%s (%s/%s@%s)", ns.Type, ns.Pool, g, gs)
					}
				case s.Namespace == rbd.SnapNamespaceTrash:
					ns.OriginalName = s.TrashOriginalName
					ns.text = fmt.Sprintf("%s (%s)", ns.Type, s.TrashOriginalName)
				}
				r.Namespace = ns
			}
			rows = append(rows, r)
		}
		if format == "json" {
			return json.NewEncoder(c.stdout).Encode(rows)
		}
		if len(rows) == 0 {
			return nil
		}
		t := &textTable{headers: []string{"SNAPID", "NAME", "SIZE", "PROTECTED", "TIMESTAMP"}, right: []bool{true, false, true, false, false}}
		if all {
			t.headers = append(t.headers, "NAMESPACE")
			t.right = append(t.right, false)
		}
		for _, r := range rows {
			prot := ""
			if r.Protected == "true" {
				prot = "yes"
			}
			cells := []string{strconv.FormatUint(r.ID, 10), r.Name, humanBytes(r.Size), prot, r.Timestamp}
			if all {
				cells = append(cells, r.Namespace.text)
			}
			t.add(cells...)
		}
		return t.write(c.stdout)
	})
}
