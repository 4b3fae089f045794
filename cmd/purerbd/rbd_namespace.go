package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd namespace create|ls|remove` and `rbd pool init`: a pool's
// RBD namespaces, and the pool itself, as rbd sets them up.

// parsePoolSpec reads POOL[/NAMESPACE] as rbd does; the pool and
// namespace default to --pool and --namespace.
func (c *rbdCommand) parsePoolSpec(args []string) (imageSpec, error) {
	sp := imageSpec{pool: c.pool, ns: c.ns}
	if len(args) == 0 {
		return sp, nil
	}
	pool, ns, hasNS := strings.Cut(args[0], "/")
	if strings.Contains(ns, "/") {
		return sp, cli.Usagef(cli.BadArgument, "invalid pool '%s'", args[0][:strings.LastIndexByte(args[0], '/')])
	}
	if pool != "" {
		sp.pool = pool
	}
	if hasNS {
		sp.ns = ns
	}
	return sp, nil
}

func (c *rbdCommand) namespaceCommand() *cli.Command {
	verb := func(name string, aliases []string, summary string, f func(context.Context, *rados.IOContext, string) error) *cli.Command {
		return &cli.Command{
			Name: name, Aliases: aliases, Summary: summary, Args: "[POOL/]NAMESPACE", MaxArgs: 1,
			Run: func(ctx context.Context, inv *cli.Invocation) error {
				sp, err := c.parsePoolSpec(inv.Args)
				if err != nil {
					return err
				}
				if sp.ns == "" {
					return cli.Usagef(cli.MissingArgument, "namespace name was not specified")
				}
				ns := sp.ns
				sp.ns = ""
				err = c.withPool(ctx, sp, func(ioc *rados.IOContext) error { return f(ctx, ioc, ns) })
				if err != nil {
					return rbdFailure(c.stderr, "namespace "+name, err)
				}
				return nil
			},
		}
	}
	var out outputFormat
	ls := &cli.Command{
		Name: "ls", Aliases: []string{"list"}, Summary: "list a pool's namespaces", Args: "[POOL]", MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error { return c.namespaceList(ctx, inv.Args, &out) },
	}
	out.register(ls)
	group := &cli.Command{Name: "namespace", Summary: "a pool's image namespaces: create, ls, remove"}
	return group.Add(
		verb("create", nil, "create a namespace", rbd.CreateNamespace),
		ls,
		verb("remove", []string{"rm"}, "remove an empty namespace", rbd.RemoveNamespace),
	)
}

func (c *rbdCommand) namespaceList(ctx context.Context, args []string, out *outputFormat) error {
	sp, err := c.parsePoolSpec(args)
	if err != nil {
		return err
	}
	sp.ns = ""
	var names []string
	err = c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		names, err = rbd.ListNamespaces(ctx, ioc)
		return err
	})
	if err != nil {
		return rbdFailure(c.stderr, "namespace ls", err)
	}
	if out.json() {
		type row struct {
			Name string `json:"name"`
		}
		rows := []row{}
		for _, n := range names {
			rows = append(rows, row{n})
		}
		return out.writeJSON(c.stdout, rows)
	}
	if len(names) == 0 {
		return nil
	}
	t := &textTable{headers: []string{"NAME"}, right: []bool{false}}
	for _, n := range names {
		t.add(n)
	}
	return t.write(c.stdout)
}

func (c *rbdCommand) poolCommand() *cli.Command {
	var force bool
	initCmd := &cli.Command{
		Name: "init", Summary: "prepare a pool for RBD images (the rbd application, rbd_info)", Args: "[POOL]", MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			sp, err := c.parsePoolSpec(inv.Args)
			if err != nil {
				return err
			}
			sp.ns = ""
			var initErr error
			err = c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
				initErr = rbd.InitPool(ctx, ioc, force)
				return nil
			})
			if err != nil {
				return rbdFailure(c.stderr, "pool init", err)
			}
			// rbd reports a failed initialisation and exits 0 all the same
			switch {
			case errors.Is(initErr, syscall.EPERM):
				fmt.Fprintln(c.stderr, "rbd: pool already registered to a different application.")
			case initErr != nil:
				fmt.Fprintf(c.stderr, "rbd: error registered application: %v\n", initErr)
			}
			return nil
		},
	}
	initCmd.Bool(&force, "--force", "enable the rbd application even if the pool has another")
	group := &cli.Command{Name: "pool", Summary: "pools: init"}
	return group.Add(initCmd)
}
