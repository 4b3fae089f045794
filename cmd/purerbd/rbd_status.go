package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd status` and `lock ls`: who watches an image and who holds
// its lock.

func (c *rbdCommand) statusCommand() *cli.Command {
	var format string
	cmd := &cli.Command{
		Name: "status", Summary: "show the clients watching an image", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error { return c.status(ctx, inv.Args[0], format) },
	}
	formatOption(cmd, &format)
	return cmd
}

func (c *rbdCommand) status(ctx context.Context, spec, format string) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: true}, func(img *rbd.Image) error {
		ws, err := img.Watchers(ctx)
		if err != nil {
			return err
		}
		// this command's own watch is not a user of the image
		own := ws[:0]
		for _, w := range ws {
			if w.Client != fmt.Sprintf("client.%d", c.radosConn.InstanceID()) {
				own = append(own, w)
			}
		}
		if format == "json" {
			type wj struct {
				Address string `json:"address"`
				Client  string `json:"client"`
				Cookie  uint64 `json:"cookie"`
			}
			out := struct {
				Watchers []wj `json:"watchers"`
			}{Watchers: []wj{}}
			for _, w := range own {
				out.Watchers = append(out.Watchers, wj{w.Address, w.Client, w.Cookie})
			}
			return json.NewEncoder(c.stdout).Encode(out)
		}
		if len(own) == 0 {
			fmt.Fprintln(c.stdout, "Watchers: none")
			return nil
		}
		fmt.Fprintln(c.stdout, "Watchers:")
		for _, w := range own {
			fmt.Fprintf(c.stdout, "\twatcher=%s %s cookie=%d\n", w.Address, w.Client, w.Cookie)
		}
		return nil
	})
}

func (c *rbdCommand) lockCommand() *cli.Command {
	var format string
	ls := &cli.Command{
		Name: "ls", Aliases: []string{"list"}, Summary: "show who holds an image's exclusive lock", Args: "IMAGE",
		MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error { return c.lockList(ctx, inv.Args[0], format) },
	}
	formatOption(ls, &format)
	group := &cli.Command{Name: "lock", Summary: "an image's locks: ls"}
	return group.Add(ls)
}

func (c *rbdCommand) lockList(ctx context.Context, spec, format string) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: true}, func(img *rbd.Image) error {
		owners, err := img.LockOwners(ctx)
		if err != nil {
			return err
		}
		if format == "json" {
			type lj struct {
				ID      string `json:"id"`
				Locker  string `json:"locker"`
				Address string `json:"address"`
			}
			out := []lj{}
			for _, o := range owners {
				out = append(out, lj{o.Cookie, o.Client, o.Address})
			}
			return json.NewEncoder(c.stdout).Encode(out)
		}
		if len(owners) == 0 {
			return nil
		}
		fmt.Fprintf(c.stdout, "There is 1 exclusive lock on this image.\n")
		tw := tabwriter.NewWriter(c.stdout, 0, 8, 1, ' ', 0)
		fmt.Fprintln(tw, "Locker\tID\tAddress")
		for _, o := range owners {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", o.Client, o.Cookie, o.Address)
		}
		return tw.Flush()
	})
}
