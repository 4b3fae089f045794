package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
)

// purge: remove every object of a pool, in every namespace, and keep
// the pool, as `rados purge POOL --yes-i-really-really-mean-it` does.

// purgeOptions are purge's own options.
type purgeOptions struct {
	sure bool // --yes-i-really-really-mean-it
}

// purgeCommand is the purge verb; it runs without -p.
func (c *radosCommand) purgeCommand() *cli.Command {
	cmd := &cli.Command{Name: "purge", Args: "POOL", MinArgs: 1, MaxArgs: 1,
		Summary: "remove every object of a pool, keeping the pool (needs --yes-i-really-really-mean-it)",
		Run:     func(ctx context.Context, inv *cli.Invocation) error { return c.purge(ctx, inv.Args[0]) }}
	cmd.Bool(&c.purgeOpt.sure, "--yes-i-really-really-mean-it", "purge: confirm")
	return cmd
}

// purge removes the objects -t at a time (16 by default, the rados
// tool's clean_up_slow), ignoring those already gone, with the full-try
// flag so that a full pool can be emptied. Without the confirmation it
// prints the rados tool's warning and fails.
func (c *radosCommand) purge(ctx context.Context, pool string) error {
	if !c.purgeOpt.sure {
		fmt.Fprint(c.stderr, "WARNING:\n"+
			"  This will PERMANENTLY DESTROY all objects from a pool with no way back.\n"+
			"  To confirm, follow pool with --yes-i-really-really-mean-it\n")
		return cli.ExitStatus(1)
	}
	io, err := c.conn.IOContext(ctx, pool, rados.AllNamespaces)
	if err != nil {
		return fmt.Errorf("error pool %s: %s", pool, errnoText(err))
	}
	// the rados tool's remover says this before it lists
	fmt.Fprintln(c.stdout, "Warning: using slow linear search")
	n, err := removeAll(ctx, io.WithFullTry(), max(c.bench.threads, 1))
	if err != nil {
		fmt.Fprintf(c.stderr, "pool %s could not be purged\n", pool)
		return fmt.Errorf("error purging pool %s: %s", pool, errnoText(err))
	}
	fmt.Fprintf(c.stdout, "Removed %d object%s\n", n, plural(n))
	fmt.Fprintf(c.stdout, "successfully purged pool %s\n", pool)
	return nil
}

// plural is the "s" of a count other than one.
func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// removeAll removes every object io lists (io's namespace must be
// AllNamespaces or one namespace), workers at a time, and returns how
// many it removed; an object removed meanwhile by someone else is not an
// error, and counts, as it does for the rados tool. It stops at the
// first failure and returns it.
func removeAll(ctx context.Context, io *rados.IOContext, workers int) (int64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	objs := make(chan rados.Object)
	var removed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for o := range objs {
				err := io.WithNamespace(o.Namespace).WithLocatorKey(o.Locator).Remove(ctx, o.Name)
				if err != nil && !errors.Is(err, rados.ErrNotFound) {
					cancel(fmt.Errorf("removing %s: %w", o.Name, err))
					continue
				}
				removed.Add(1)
			}
		})
	}
	var listErr error
	for o, err := range io.Objects(ctx) {
		if err != nil {
			listErr = fmt.Errorf("listing: %w", err)
			break
		}
		select {
		case objs <- o:
			continue
		case <-ctx.Done():
		}
		break
	}
	close(objs)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return removed.Load(), err
	}
	return removed.Load(), listErr
}
