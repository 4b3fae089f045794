package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd group`: groups of images and their snapshots, with rbd's
// verbs, argument forms ([POOL/[NAMESPACE/]]GROUP[@SNAP] or --pool,
// --namespace, --group, --snap), output and exit codes, including its
// lenient ones (removing a missing group, or listing its images or
// snapshots, succeeds).

// groupSpecPattern is rbd's spec with full validation: no / or @ in any
// name.
var groupSpecPattern = regexp.MustCompile(`^(?:([^/@]+)/(?:([^/@]+)/)?)?([^/@]+)(?:@([^/@]+))?$`)

// groupSpec is a group (or a group snapshot, or an image) named on the
// command line.
type groupSpec struct {
	pool, ns, name, snap string
	// givenPool and givenNS are the pool and namespace the spec or the
	// verb's own options named, before the defaults
	givenPool, givenNS string
}

// specArgs hands out the positional arguments in order, as rbd's
// argument index does: an argument an option already stood for is not
// taken.
type specArgs struct {
	args []string
	next int
}

func (a *specArgs) take() string {
	if a.next >= len(a.args) {
		return ""
	}
	a.next++
	return a.args[a.next-1]
}

// snapPresence says whether a spec may, must or must not name a snapshot.
type snapPresence int

const (
	snapNone snapPresence = iota
	snapRequired
)

// specOpts are the options that name a spec's parts instead of the
// positional argument.
type specOpts struct {
	pool, ns, name, snap string
}

// parse fills a spec from the options and, when they name no group (or
// image), the next positional argument; what is still missing defaults
// to the rbd command's --pool and --namespace. what is "group" or
// "image", for the messages.
func (c *rbdCommand) parseGroupSpec(a *specArgs, o specOpts, what string, snap snapPresence) (groupSpec, error) {
	sp := groupSpec{pool: o.pool, ns: o.ns, name: o.name, snap: o.snap}
	if sp.name == "" {
		if s := a.take(); s != "" {
			m := groupSpecPattern.FindStringSubmatch(s)
			if m == nil {
				return sp, cli.Usagef(cli.BadArgument, "invalid spec '%s'", s)
			}
			if m[1] != "" {
				sp.pool = m[1]
			}
			if m[2] != "" {
				sp.ns = m[2]
			}
			sp.name = m[3]
			if m[4] != "" {
				sp.snap = m[4]
			}
		}
	}
	sp.givenPool, sp.givenNS = sp.pool, sp.ns
	if sp.pool == "" {
		sp.pool = c.pool
	}
	if sp.ns == "" {
		sp.ns = c.ns
	}
	if sp.name == "" {
		return sp, cli.Usagef(cli.MissingArgument, "%s name was not specified", what)
	}
	switch {
	case snap == snapNone && sp.snap != "":
		return sp, cli.Usagef(cli.BadArgument, "snapshot name specified for a command that doesn't use it")
	case snap == snapRequired && sp.snap == "":
		return sp, cli.Usagef(cli.MissingArgument, "snapshot name was not specified")
	}
	return sp, nil
}

// withGroupPool runs f with an I/O context for pool and namespace ns,
// which must exist (rbd: ENOENT otherwise).
func (c *rbdCommand) withGroupPool(ctx context.Context, pool, ns string, f func(ioc *rados.IOContext) error) error {
	return c.withPool(ctx, imageSpec{pool: pool, ns: ns}, func(ioc *rados.IOContext) error {
		ok, err := rbd.NamespaceExists(ctx, ioc, ns)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: namespace '%s' does not exist", rbd.ErrNotFound, ns)
		}
		return f(ioc)
	})
}

func (c *rbdCommand) groupCommand() *cli.Command {
	group := &cli.Command{Name: "group", Summary: "groups of images and their snapshots: create, ls, rm, rename, image, snap"}
	return group.Add(
		c.groupSimpleVerb("create", nil, "create a group", "create", rbd.CreateGroup),
		c.groupListCommand(),
		c.groupSimpleVerb("rm", []string{"remove"}, "remove a group, its snapshots and its members' links", "remove",
			func(ctx context.Context, ioc *rados.IOContext, name string) error {
				// as rbd (librbd ignores a missing id): a missing group is removed
				if err := rbd.RemoveGroup(ctx, ioc, name); err != nil && !errors.Is(err, rbd.ErrGroupNotFound) {
					return err
				}
				return nil
			}),
		c.groupRenameCommand(),
		c.groupImageCommand(),
		c.groupSnapCommand(),
	)
}

// groupSimpleVerb is a verb on one group: f does it.
func (c *rbdCommand) groupSimpleVerb(name string, aliases []string, summary, errVerb string,
	f func(context.Context, *rados.IOContext, string) error) *cli.Command {
	var o specOpts
	cmd := &cli.Command{
		Name: name, Aliases: aliases, Summary: summary, Args: "[POOL/[NAMESPACE/]]GROUP", MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			sp, err := c.parseGroupSpec(&specArgs{args: inv.Args}, o, "group", snapNone)
			if err != nil {
				return err
			}
			err = c.withGroupPool(ctx, sp.pool, sp.ns, func(ioc *rados.IOContext) error { return f(ctx, ioc, sp.name) })
			if err != nil {
				return rbdFailure(c.stderr, errVerb, err)
			}
			return nil
		},
	}
	cmd.String(&o.name, "--group GROUP", "group name")
	return cmd
}

func (c *rbdCommand) groupListCommand() *cli.Command {
	var out outputFormat
	cmd := &cli.Command{
		Name: "ls", Aliases: []string{"list"}, Summary: "list the groups of a pool (or namespace)", Args: "[POOL[/NAMESPACE]]", MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			sp, err := c.parsePoolSpec(inv.Args)
			if err != nil {
				return err
			}
			var names []string
			err = c.withGroupPool(ctx, sp.pool, sp.ns, func(ioc *rados.IOContext) error {
				names, err = rbd.ListGroups(ctx, ioc)
				return err
			})
			if err != nil {
				return rbdFailure(c.stderr, "list", err)
			}
			if out.json() {
				return out.writeJSON(c.stdout, append([]string{}, names...))
			}
			for _, n := range names {
				fmt.Fprintln(c.stdout, n)
			}
			return nil
		},
	}
	out.register(cmd)
	return cmd
}

func (c *rbdCommand) groupRenameCommand() *cli.Command {
	var src, dst specOpts
	var srcPool, srcNS string
	cmd := &cli.Command{
		Name: "rename", Summary: "rename a group within its pool and namespace", Args: "SOURCE-GROUP DEST-GROUP", MaxArgs: 2,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			a := &specArgs{args: inv.Args}
			o := src
			o.pool, o.ns = srcPool, srcNS
			s, err := c.parseGroupSpec(a, o, "group", snapNone)
			if err != nil {
				return err
			}
			d, err := c.parseGroupSpec(a, dst, "destination group", snapNone)
			if err != nil {
				return err
			}
			// rbd compares the pools and namespaces as given, before
			// defaults: a destination that names a pool the source does
			// not is refused even when it is the same one
			if s.givenPool != d.givenPool {
				return rbdFailure(c.stderr, "group rename", fmt.Errorf("%w: group rename across pools not supported", rbd.ErrInvalid))
			}
			if s.givenNS != d.givenNS {
				return rbdFailure(c.stderr, "group rename", fmt.Errorf("%w: group rename across namespaces not supported", rbd.ErrInvalid))
			}
			err = c.withGroupPool(ctx, s.pool, s.ns, func(ioc *rados.IOContext) error { return rbd.RenameGroup(ctx, ioc, s.name, d.name) })
			if err != nil {
				return rbdFailure(c.stderr, "rename", err)
			}
			return nil
		},
	}
	cmd.String(&srcPool, "-p, --pool POOL", "source pool name")
	cmd.String(&srcNS, "--namespace NS", "source namespace name")
	cmd.String(&src.name, "--group GROUP", "source group name")
	cmd.String(&dst.pool, "--dest-pool POOL", "destination pool name")
	cmd.String(&dst.ns, "--dest-namespace NS", "destination namespace name")
	cmd.String(&dst.name, "--dest-group GROUP", "destination group name")
	return cmd
}

func (c *rbdCommand) groupImageCommand() *cli.Command {
	// verb is add or remove: both take a group and an image spec
	verb := func(name string, aliases []string, summary, errVerb string, byID bool,
		f func(ctx context.Context, gioc *rados.IOContext, group string, iioc *rados.IOContext, image string) error) *cli.Command {
		var g, i specOpts
		var pool, imageID string
		cmd := &cli.Command{
			Name: name, Aliases: aliases, Summary: summary, Args: "GROUP IMAGE", MaxArgs: 2,
			Run: func(ctx context.Context, inv *cli.Invocation) error {
				a := &specArgs{args: inv.Args}
				go1, io1 := g, i
				if go1.pool == "" {
					go1.pool = pool
				}
				if io1.pool == "" {
					io1.pool = pool
				}
				gs, err := c.parseGroupSpec(a, go1, "group", snapNone)
				if err != nil {
					return err
				}
				image := imageID
				is := groupSpec{pool: io1.pool, ns: io1.ns}
				if imageID == "" {
					if is, err = c.parseGroupSpec(a, io1, "image", snapNone); err != nil {
						return err
					}
					image = is.name
				} else {
					if is.pool == "" {
						is.pool = c.pool
					}
					if is.ns == "" {
						is.ns = c.ns
					}
				}
				if gs.ns != is.ns {
					return cli.Usagef(cli.BadArgument, "group and image namespace must match.")
				}
				err = c.withGroupPool(ctx, gs.pool, gs.ns, func(gioc *rados.IOContext) error {
					return c.withGroupPool(ctx, is.pool, is.ns, func(iioc *rados.IOContext) error {
						return f(ctx, gioc, gs.name, iioc, image)
					})
				})
				if err != nil {
					return rbdFailure(c.stderr, errVerb, err)
				}
				return nil
			},
		}
		cmd.String(&g.pool, "--group-pool POOL", "group pool name")
		cmd.String(&g.ns, "--group-namespace NS", "group namespace name")
		cmd.String(&g.name, "--group GROUP", "group name")
		cmd.String(&i.pool, "--image-pool POOL", "image pool name")
		cmd.String(&i.ns, "--image-namespace NS", "image namespace name")
		cmd.String(&i.name, "--image IMAGE", "image name")
		cmd.String(&pool, "-p, --pool POOL", "pool name unless overridden")
		if byID {
			cmd.String(&imageID, "--image-id ID", "image id (instead of a name)")
		}
		return cmd
	}
	remove := func(ctx context.Context, gioc *rados.IOContext, group string, iioc *rados.IOContext, image string) error {
		return rbd.RemoveGroupImage(ctx, gioc, group, iioc, image)
	}
	rm := verb("rm", []string{"remove"}, "remove an image from a group", "remove image", true, remove)
	var o specOpts
	var out outputFormat
	ls := &cli.Command{
		Name: "ls", Aliases: []string{"list"}, Summary: "list a group's images", Args: "[POOL/[NAMESPACE/]]GROUP", MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			sp, err := c.parseGroupSpec(&specArgs{args: inv.Args}, o, "group", snapNone)
			if err != nil {
				return err
			}
			return c.groupImageList(ctx, sp, &out)
		},
	}
	ls.String(&o.name, "--group GROUP", "group name")
	out.register(ls)
	group := &cli.Command{Name: "image", Summary: "a group's images: add, rm, ls"}
	return group.Add(verb("add", nil, "add an image to a group", "add image", false, rbd.AddGroupImage), rm, ls)
}

// groupImageList prints a group's images as rbd group image ls does; a
// missing group has none.
func (c *rbdCommand) groupImageList(ctx context.Context, sp groupSpec, out *outputFormat) error {
	var images []rbd.GroupImage
	err := c.withGroupPool(ctx, sp.pool, sp.ns, func(ioc *rados.IOContext) error {
		var err error
		images, err = rbd.GroupImages(ctx, ioc, sp.name)
		if errors.Is(err, rbd.ErrGroupNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return rbdFailure(c.stderr, "group image list", err)
	}
	if out.json() {
		type row struct {
			Image     string `json:"image"`
			Pool      string `json:"pool"`
			Namespace string `json:"namespace"`
			State     int    `json:"state"`
		}
		rows := []row{}
		for _, im := range images {
			rows = append(rows, row{Image: im.Name, Pool: im.Pool, Namespace: im.Namespace, State: int(im.State)})
		}
		return out.writeJSON(c.stdout, rows)
	}
	for _, im := range images {
		state := ""
		if im.State == rbd.GroupImageIncomplete {
			state = "incomplete"
		}
		path := im.Pool + "/"
		if im.Namespace != "" {
			path += im.Namespace + "/"
		}
		fmt.Fprintf(c.stdout, "%s%s %s\n", path, im.Name, state)
	}
	return nil
}

func (c *rbdCommand) groupSnapCommand() *cli.Command {
	// verb is a verb on one group snapshot: f does it
	verb := func(name string, aliases []string, summary, errVerb string, setup func(*cli.Command),
		f func(ctx context.Context, ioc *rados.IOContext, sp groupSpec) error) *cli.Command {
		var o specOpts
		cmd := &cli.Command{
			Name: name, Aliases: aliases, Summary: summary, Args: "[POOL/[NAMESPACE/]]GROUP@SNAP", MaxArgs: 1,
			Run: func(ctx context.Context, inv *cli.Invocation) error {
				sp, err := c.parseGroupSpec(&specArgs{args: inv.Args}, o, "group", snapRequired)
				if err != nil {
					return err
				}
				err = c.withGroupPool(ctx, sp.pool, sp.ns, func(ioc *rados.IOContext) error { return f(ctx, ioc, sp) })
				if err != nil {
					return rbdFailure(c.stderr, errVerb, err)
				}
				return nil
			},
		}
		cmd.String(&o.name, "--group GROUP", "group name")
		cmd.String(&o.snap, "--snap SNAP", "snapshot name")
		if setup != nil {
			setup(cmd)
		}
		return cmd
	}
	var skipQuiesce, ignoreQuiesce, noProgress bool
	create := verb("create", nil, "snapshot every image of a group at once", "group snap create",
		func(cmd *cli.Command) {
			cmd.Bool(&skipQuiesce, "--skip-quiesce", "do not run quiesce hooks (purerbd never does)")
			cmd.Bool(&ignoreQuiesce, "--ignore-quiesce-error", "ignore quiesce hook errors (purerbd runs none)")
		},
		func(ctx context.Context, ioc *rados.IOContext, sp groupSpec) error {
			return rbd.CreateGroupSnapshot(ctx, ioc, sp.name, sp.snap)
		})
	rm := verb("rm", []string{"remove"}, "remove a group snapshot and its image snapshots", "group snap remove", nil,
		func(ctx context.Context, ioc *rados.IOContext, sp groupSpec) error {
			return rbd.RemoveGroupSnapshot(ctx, ioc, sp.name, sp.snap)
		})
	rollback := verb("rollback", nil, "roll every image of a group back to a group snapshot", "group snap rollback",
		func(cmd *cli.Command) { cmd.Bool(&noProgress, "--no-progress", "do not report progress") },
		func(ctx context.Context, ioc *rados.IOContext, sp groupSpec) error {
			if err := rbd.RollbackGroupSnapshot(ctx, ioc, sp.name, sp.snap); err != nil {
				return err
			}
			if !noProgress {
				fmt.Fprintln(c.stderr, "Rolling back to group snapshot: 100% complete...done.")
			}
			return nil
		})
	var o specOpts
	var out outputFormat
	ls := &cli.Command{
		Name: "ls", Aliases: []string{"list"}, Summary: "list a group's snapshots", Args: "[POOL/[NAMESPACE/]]GROUP", MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			sp, err := c.parseGroupSpec(&specArgs{args: inv.Args}, o, "group", snapNone)
			if err != nil {
				return err
			}
			return c.groupSnapList(ctx, sp, &out)
		},
	}
	ls.String(&o.name, "--group GROUP", "group name")
	out.register(ls)
	group := &cli.Command{Name: "snap", Summary: "group snapshots: create, ls, rm, rename, rollback"}
	return group.Add(create, ls, rm, c.groupSnapRenameCommand(), rollback)
}

func (c *rbdCommand) groupSnapRenameCommand() *cli.Command {
	var o specOpts
	var dest string
	cmd := &cli.Command{
		Name: "rename", Summary: "rename a group snapshot", Args: "[POOL/[NAMESPACE/]]GROUP@SNAP DEST-SNAP", MaxArgs: 2,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			a := &specArgs{args: inv.Args}
			sp, err := c.parseGroupSpec(a, o, "group", snapRequired)
			if err != nil {
				return err
			}
			to := dest
			if to == "" {
				to = a.take()
			}
			if to == "" {
				return cli.Usagef(cli.MissingArgument, "destination snapshot name was not specified")
			}
			if strings.ContainsAny(to, "/@") {
				return cli.Usagef(cli.BadArgument, "invalid snap name '%s'", to)
			}
			err = c.withGroupPool(ctx, sp.pool, sp.ns, func(ioc *rados.IOContext) error {
				return rbd.RenameGroupSnapshot(ctx, ioc, sp.name, sp.snap, to)
			})
			if err != nil {
				return rbdFailure(c.stderr, "group snap rename", err)
			}
			return nil
		},
	}
	cmd.String(&o.name, "--group GROUP", "group name")
	cmd.String(&o.snap, "--snap SNAP", "snapshot name")
	cmd.String(&dest, "--dest-snap SNAP", "destination snapshot name")
	return cmd
}

// groupSnapList prints a group's snapshots as rbd group snap ls does; a
// missing group has none.
func (c *rbdCommand) groupSnapList(ctx context.Context, sp groupSpec, out *outputFormat) error {
	var snaps []rbd.GroupSnapInfo
	err := c.withGroupPool(ctx, sp.pool, sp.ns, func(ioc *rados.IOContext) error {
		var err error
		snaps, err = rbd.GroupSnapshots(ctx, ioc, sp.name)
		if errors.Is(err, rbd.ErrGroupNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return rbdFailure(c.stderr, "group snap list", err)
	}
	state := func(s rbd.GroupSnapState) string {
		if s == rbd.GroupSnapIncomplete {
			return "incomplete"
		}
		return "ok"
	}
	if out.json() {
		type row struct {
			Snapshot string `json:"snapshot"`
			State    string `json:"state"`
		}
		rows := []row{}
		for _, s := range snaps {
			rows = append(rows, row{Snapshot: s.Name, State: state(s.State)})
		}
		return out.writeJSON(c.stdout, rows)
	}
	if len(snaps) == 0 {
		return nil
	}
	t := &textTable{headers: []string{"NAME", "STATUS"}, right: []bool{false, true}, alignHeaders: true}
	for _, s := range snaps {
		t.add(s.Name, state(s.State))
	}
	return t.write(c.stdout)
}
