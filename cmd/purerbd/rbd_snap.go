package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/purerbd/purerbd/rbd"
	"github.com/purerbd/purerbd/rbd/cls"
)

// `purerbd rbd snap`: list, create, remove, protect, unprotect and roll
// back snapshots.

func (c *rbdCommand) snap(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: snap create|ls|rm|protect|unprotect|rollback ARGS")
	}
	verb, args := args[0], args[1:]
	fs := newFlagSet("snap "+verb, c.stderr)
	format := fs.String("format", "plain", "plain or json")
	all := fs.Bool("all", false, "snap ls: also list snapshots of other namespaces (trash, mirror, group)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: snap %s IMAGE[@SNAP]", verb)
	}
	switch verb {
	case "ls", "list":
		sp, err := c.parseSpec(pos[0], false)
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
				if s.Namespace.Type != cls.NamespaceUser && !*all {
					continue
				}
				rows = append(rows, row{ID: s.ID, Name: s.Name, Size: s.Size, Protected: strconv.FormatBool(s.Protected),
					Timestamp: time.Unix(int64(s.Timestamp.Sec), 0).Format(time.ANSIC)})
			}
			if *format == "json" {
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
	case "create", "add", "rm", "remove", "protect", "unprotect", "rollback", "revert":
		sp, err := c.parseSpec(pos[0], true)
		if err != nil {
			return err
		}
		snapName := sp.snap
		sp.snap = ""
		return c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error {
			switch verb {
			case "create", "add":
				return img.CreateSnapshot(ctx, snapName)
			case "rm", "remove":
				return img.RemoveSnapshot(ctx, snapName)
			case "protect":
				return img.ProtectSnapshot(ctx, snapName)
			case "unprotect":
				return img.UnprotectSnapshot(ctx, snapName)
			default:
				return img.RollbackSnapshot(ctx, snapName)
			}
		})
	}
	return fmt.Errorf("unknown snap verb %q", verb)
}
