package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
	var tag string
	add := &cli.Command{
		Name: "add", Summary: "take an image's lock by hand (advisory; --shared TAG to share it)", Args: "IMAGE LOCK-ID",
		MinArgs: 2, MaxArgs: 2,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			tagged := ""
			if tag != "" {
				tagged = " with a different tag"
			}
			return c.lockChange(ctx, "add", inv.Args[0], tagged, func(img *rbd.Image) error {
				return img.AddLock(ctx, inv.Args[1], tag, tag != "")
			})
		},
	}
	add.String(&tag, "--shared TAG", "take the lock shared with the holders of this tag")
	rm := &cli.Command{
		Name: "rm", Aliases: []string{"remove"}, Summary: "break a holder's lock on an image (blocklisting the holder)",
		Args: "IMAGE LOCK-ID LOCKER", MinArgs: 3, MaxArgs: 3,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return c.lockChange(ctx, "rm", inv.Args[0], "", func(img *rbd.Image) error {
				return img.RemoveLock(ctx, inv.Args[2], inv.Args[1])
			})
		},
	}
	group := &cli.Command{Name: "lock", Summary: "an image's locks: ls, add, rm"}
	return group.Add(ls, add, rm)
}

// lockChange runs f on the image spec names, reporting a failure as rbd
// lock add and rm do.
func (c *rbdCommand) lockChange(ctx context.Context, verb, spec, tagged string, f func(img *rbd.Image) error) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	if sp.snap != "" {
		return cli.Usagef(cli.BadArgument, "snapshot name specified for a command that doesn't use it")
	}
	err = c.withImage(ctx, sp, rbd.OpenOptions{}, f)
	switch {
	case err == nil:
		return nil
	case verb == "add" && (errors.Is(err, rbd.ErrBusy) || errors.Is(err, rbd.ErrExists)):
		fmt.Fprintln(c.stderr, "rbd: lock is already held by someone else"+tagged)
		return cli.ExitStatus(errnoOf(err))
	}
	return rbdFailure(c.stderr, "lock "+verb, err)
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
		shared, tag, err := img.LockShared(ctx)
		if err != nil {
			return err
		}
		kind := "exclusive"
		if shared {
			kind = "shared"
		}
		if len(owners) == 1 {
			fmt.Fprintf(c.stdout, "There is 1 %s lock on this image.\n", kind)
		} else {
			fmt.Fprintf(c.stdout, "There are %d %s locks on this image.\n", len(owners), kind)
		}
		if shared {
			fmt.Fprintf(c.stdout, "Lock tag: %s\n", tag)
		}
		t := &textTable{headers: []string{"Locker", "ID", "Address"}, right: []bool{false, false, false}}
		for _, o := range owners {
			t.add(o.Client, o.Cookie, o.Address)
		}
		return t.write(c.stdout)
	})
}
