package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
)

// Object verbs beyond put and get: append, cp, touch, listwatchers,
// the omap header and clearomap.

// appendFile appends a file (or stdin) to an object in op-size chunks;
// empty input still creates the object, as the rados tool's empty
// append does.
func (c *radosCommand) appendFile(ctx context.Context, oid, path string) error {
	in := c.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("error reading input file %s: %w", path, err)
		}
		defer f.Close()
		in = f
	}
	buf := make([]byte, radosChunk)
	for {
		n, err := io.ReadFull(in, buf)
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return fmt.Errorf("error reading input file %s: %w", path, err)
		}
		if aerr := c.io.Append(ctx, oid, buf[:n]); aerr != nil {
			return c.wrap("appending", oid, aerr)
		}
		if n < len(buf) {
			return nil
		}
	}
}

// copyTarget is where cp copies to: --target-pool, --target-nspace and
// --target-locator.
type copyTarget struct {
	pool, ns, locator string
}

// cp copies an object, its data, xattrs, omap header and omap, into the
// same pool (under another name) or into --target-pool. As with the
// rados tool, the copy goes to the target's default namespace unless
// --target-nspace names one, whatever -N says.
func (c *radosCommand) cp(ctx context.Context, args []string) error {
	if len(args) > 2 {
		return fmt.Errorf("too many arguments")
	}
	target := c.target.pool
	if target == "" {
		target = c.pool
	}
	targetObj := args[0]
	if len(args) == 2 {
		targetObj = args[1]
	} else if target == c.pool {
		return fmt.Errorf("cannot copy object into itself")
	}
	fail := func(err error) error {
		return fmt.Errorf("error copying %s/%s => %s/%s: %s", c.pool, args[0], target, targetObj, errnoText(err))
	}
	dst, err := c.conn.IOContext(ctx, target, c.target.ns)
	if err != nil {
		return fmt.Errorf("error opening target pool %s: %s", target, errnoText(err))
	}
	if c.target.locator != "" {
		dst = dst.WithLocatorKey(c.target.locator)
	}
	if err := copyObject(ctx, c.io, args[0], dst, targetObj); err != nil {
		return fail(err)
	}
	return nil
}

// copyObject copies src's object oid — data, xattrs, omap header and
// omap — to dst's object dstOid, replacing what that held. The source is
// read here and the copy written in one operation, so the target never
// shows half of it.
func copyObject(ctx context.Context, src *rados.IOContext, oid string, dst *rados.IOContext, dstOid string) error {
	data, err := src.ReadAll(ctx, oid)
	if err != nil {
		return err
	}
	xattrs, err := src.ListXattrs(ctx, oid)
	if err != nil {
		return err
	}
	header, err := src.OmapGetHeader(ctx, oid)
	if err != nil {
		return err
	}
	omap, err := src.OmapGetAll(ctx, oid, "")
	if err != nil {
		return err
	}
	w := rados.NewWriteOp()
	w.WriteFull(data)
	for name, v := range xattrs {
		w.SetXattr(name, v)
	}
	w.CleanOmap()
	if len(header) > 0 {
		w.SetOmapHeader(header)
	}
	if len(omap) > 0 {
		w.SetOmap(omap)
	}
	return dst.OperateWrite(ctx, dstOid, w)
}

// touch creates an object if it is missing and sets its modification
// time (now, or the Unix time given).
func (c *radosCommand) touch(ctx context.Context, args []string) error {
	ts := time.Now()
	if len(args) > 1 {
		sec, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			// the rados tool's words, capitalized as it writes them
			fmt.Fprintf(c.stderr, "Invalid value for timestamp: '%s'\n", args[1])
			return cli.ExitStatus(1)
		}
		ts = time.Unix(sec, 0)
	}
	w := rados.NewWriteOp()
	w.Create(false)
	w.SetMTime(ts)
	if err := c.io.OperateWrite(ctx, args[0], w); err != nil {
		return fmt.Errorf("error touch-ing %s/%s: %s", c.pool, args[0], errnoText(err))
	}
	return nil
}

// listwatchers prints each watch on an object as the rados tool does:
// "watcher=ADDR client.ID cookie=COOKIE".
func (c *radosCommand) listwatchers(ctx context.Context, oid string) error {
	ws, err := c.io.ListWatchers(ctx, oid)
	if err != nil {
		return fmt.Errorf("error listing watchers %s/%s: %s", c.pool, oid, errnoText(err))
	}
	for _, w := range ws {
		fmt.Fprintf(c.stdout, "watcher=%s client.%d cookie=%d\n", w.Addr, w.Name.Num, w.Cookie)
	}
	return nil
}

// getomapheader hexdumps an object's omap header, or saves it to a file.
func (c *radosCommand) getomapheader(ctx context.Context, args []string) error {
	h, err := c.io.OmapGetHeader(ctx, args[0])
	if err != nil {
		return fmt.Errorf("error getting omap header %s/%s: %s", c.pool, args[0], errnoText(err))
	}
	if len(args) > 1 {
		fmt.Fprintf(c.stderr, "Writing to %s\n", args[1])
		if args[1] == "-" {
			_, err = c.stdout.Write(h)
			return err
		}
		return os.WriteFile(args[1], h, 0o644)
	}
	fmt.Fprintf(c.stdout, "header (%d bytes) :\n", len(h))
	hexdump(c.stdout, h)
	fmt.Fprintln(c.stdout)
	return nil
}

// clearomap removes every omap key (and the header) of each object,
// stopping at the first that fails.
func (c *radosCommand) clearomap(ctx context.Context, oids []string) error {
	for _, oid := range oids {
		if err := c.io.OmapClear(ctx, oid); err != nil {
			return fmt.Errorf("error clearing omap keys %s/%s: %s", c.pool, oid, errnoText(err))
		}
	}
	return nil
}
