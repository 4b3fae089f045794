package main

import (
	"context"
	"fmt"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/osdmap"
)

// Pool snapshots: lssnap, mksnap and rmsnap.

// lssnap lists the pool's snapshots as the rados tool does: id, name
// and local creation time, tab-separated, then a count.
func (c *radosCommand) lssnap(_ context.Context) error {
	snaps, err := c.io.ListSnaps()
	if err != nil {
		return fmt.Errorf("error listing snapshots of pool %s: %s", c.pool, errnoText(err))
	}
	for _, s := range snaps {
		fmt.Fprintf(c.stdout, "%d\t%s\t%s\n", s.ID, s.Name, s.Created.Local().Format("2006.01.02 15:04:05"))
	}
	fmt.Fprintf(c.stdout, "%d snaps\n", len(snaps))
	return nil
}

// mksnap takes a pool snapshot; pools whose snapshots are self-managed
// (RBD's) refuse it.
func (c *radosCommand) mksnap(ctx context.Context, args []string) error {
	if p := c.conn.OSDMap().Pool(c.io.Pool()); p != nil && p.Flags&osdmap.PoolFlagSelfManagedSnaps != 0 {
		return fmt.Errorf("can't create snapshot: pool %s is in selfmanaged snaps mode", c.pool)
	}
	fail := func(err error) error {
		return fmt.Errorf("error creating pool %s snapshot %s: %s", c.pool, args[0], errnoText(err))
	}
	// the monitors' command succeeds for a name that exists; librados'
	// pool op, which the rados tool uses, fails
	if _, err := c.io.LookupSnap(args[0]); err == nil {
		return fail(rados.Errno(syscall.EEXIST))
	}
	if err := c.io.CreateSnap(ctx, args[0]); err != nil {
		return fail(err)
	}
	fmt.Fprintf(c.stdout, "created pool %s snap %s\n", c.pool, args[0])
	return nil
}

// rmsnap removes a pool snapshot; one that does not exist is an error.
func (c *radosCommand) rmsnap(ctx context.Context, args []string) error {
	fail := func(err error) error {
		return fmt.Errorf("error removing pool %s snapshot %s: %s", c.pool, args[0], errnoText(err))
	}
	if _, err := c.io.LookupSnap(args[0]); err != nil {
		return fail(err)
	}
	if err := c.io.RemoveSnap(ctx, args[0]); err != nil {
		return fail(err)
	}
	fmt.Fprintf(c.stdout, "removed pool %s snap %s\n", c.pool, args[0])
	return nil
}

// rollback restores an object to its state at a pool snapshot.
func (c *radosCommand) rollback(ctx context.Context, args []string) error {
	if err := c.io.Rollback(ctx, args[0], args[1]); err != nil {
		return fmt.Errorf("error rolling back pool %s to snapshot %s: %s", c.pool, args[1], errnoText(err))
	}
	fmt.Fprintf(c.stdout, "rolled back pool %s to snapshot %s\n", c.pool, args[1])
	return nil
}
