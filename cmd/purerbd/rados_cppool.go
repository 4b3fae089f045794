package main

import (
	"context"
	"fmt"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/osdmap"
)

// cppool: copy every object of a pool, in every namespace, into another
// existing pool, as `rados cppool SRC DST` does.

// cppoolCommand is the cppool verb; it runs without -p.
func (c *radosCommand) cppoolCommand() *cli.Command {
	cmd := &cli.Command{Name: "cppool", Args: "SRC-POOL DEST-POOL", MinArgs: 2, MaxArgs: 2,
		Summary: "copy every object of a pool into another pool",
		Run:     func(ctx context.Context, inv *cli.Invocation) error { return c.cppool(ctx, inv.Args[0], inv.Args[1]) }}
	cmd.Bool(&c.cppoolForce, "--yes-i-really-mean-it", "cppool: copy a pool with self-managed snapshots, which the copy loses")
	return cmd
}

// cppool copies each object — data, xattrs, omap header and omap — into
// the same namespace and name of dst, printing
// "SRC:[NS/]NAME[(@LOCATOR)] => DST:[NS/]NAME" before each as the rados
// tool does; the copies have no locator key. Snapshots are not copied:
// a pool whose snapshots are self-managed (RBD's) is refused without
// --yes-i-really-mean-it. It stops at the first object that fails.
func (c *radosCommand) cppool(ctx context.Context, srcPool, dstPool string) error {
	if srcPool == dstPool {
		return fmt.Errorf("cannot copy pool into itself")
	}
	fmt.Fprintln(c.stderr, "WARNING: pool copy does not preserve user_version, which some     apps may rely on.")
	if id, err := c.conn.LookupPool(ctx, srcPool); err == nil {
		if p := c.conn.OSDMap().Pool(id); p != nil && p.Flags&osdmap.PoolFlagSelfManagedSnaps != 0 {
			fmt.Fprintf(c.stderr, "WARNING: pool %s has selfmanaged snaps, which are not preserved\n"+
				"    by the cppool operation.  This will break any snapshot user.\n", srcPool)
			if !c.cppoolForce {
				fmt.Fprint(c.stderr, "    If you insist on making a broken copy, you can pass\n"+
					"    --yes-i-really-mean-it to proceed anyway.\n")
				return cli.ExitStatus(1)
			}
		}
	}
	fail := func(err error) error {
		return fmt.Errorf("error copying pool %s => %s: %s", srcPool, dstPool, errnoText(err))
	}
	src, err := c.conn.IOContext(ctx, srcPool, rados.AllNamespaces)
	if err != nil {
		fmt.Fprintf(c.stderr, "cannot open source pool: %s\n", srcPool)
		return fail(err)
	}
	dst, err := c.conn.IOContext(ctx, dstPool, "")
	if err != nil {
		fmt.Fprintf(c.stderr, "cannot open target pool: %s\n", dstPool)
		return fail(err)
	}
	for o, err := range src.Objects(ctx) {
		if err != nil {
			return fail(err)
		}
		name := o.Name
		if o.Namespace != "" {
			name = o.Namespace + "/" + o.Name
		}
		srcName := name
		if o.Locator != "" {
			srcName += "(@" + o.Locator + ")"
		}
		fmt.Fprintf(c.stdout, "%s:%s => %s:%s\n", srcPool, srcName, dstPool, name)
		from := src.WithNamespace(o.Namespace).WithLocatorKey(o.Locator)
		if err := copyObject(ctx, from, o.Name, dst.WithNamespace(o.Namespace), o.Name); err != nil {
			fmt.Fprintf(c.stderr, "error copying object: %s\n", errnoText(err))
			return fail(err)
		}
	}
	fmt.Fprintf(c.stdout, "successfully copied pool %s\n", srcPool)
	return nil
}
