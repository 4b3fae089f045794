package main

import (
	"bufio"
	"context"
	"fmt"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
	"github.com/purerbd/purerbd/rbd/watchnotify"
)

// `purerbd rbd watch IMAGE`: watch the image's header object and print
// every notification it receives (header updates, lock traffic, resize
// and snapshot requests) in rbd watch's words, with the librbd op it
// carries, acknowledging each, until a line or end of file on stdin (or
// an interrupt).

// unknownNotifyOp is the op librbd gives a payload it cannot decode
// (static_cast<NotifyOp>(-1)).
const unknownNotifyOp = 1<<32 - 1

func (c *rbdCommand) watchCommand() *cli.Command {
	return &cli.Command{
		Name: "watch", Summary: "watch events on an image", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			sp, err := c.parseSpec(inv.Args[0], false)
			if err != nil {
				return err
			}
			if sp.snap != "" {
				return cli.Usagef(cli.BadArgument, "snapshot name specified for a command that doesn't use it")
			}
			err = c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
				img, err := rbd.Open(ctx, ioc, sp.name, rbd.OpenOptions{ReadOnly: true})
				if err != nil {
					return err
				}
				defer img.Close()
				return c.watch(ctx, ioc, sp.name, "rbd_header."+img.ID())
			})
			if err != nil {
				return rbdFailure(c.stderr, "watch", err)
			}
			return nil
		},
	}
}

// watch prints the notifications oid receives until stdin has a line
// or ends, or ctx is done. A lost watch is reported, as rbd does, and
// registered again.
func (c *rbdCommand) watch(ctx context.Context, ioc *rados.IOContext, name, oid string) error {
	w, err := ioc.Watch(ctx, oid)
	if err != nil {
		return fmt.Errorf("watching %s: %w", oid, err)
	}
	defer func() { _ = w.Close(context.WithoutCancel(ctx)) }()
	fmt.Fprintln(c.stdout, "press enter to exit...")
	enter := make(chan struct{})
	if c.stdin != nil {
		go func() {
			_, _ = bufio.NewReader(c.stdin).ReadString('\n')
			close(enter)
		}()
	}
	for {
		select {
		case <-enter:
			return nil
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events():
			if !ok || ev.Err != nil {
				werr := ev.Err
				if werr == nil {
					werr = w.Err()
				}
				fmt.Fprintf(c.stderr, "%s received error: cookie=%d, err=%v\n", name, w.ID(), werr)
				_ = w.Close(ctx)
				nw, err := ioc.Watch(ctx, oid)
				if err != nil {
					return fmt.Errorf("watching %s again: %w", oid, err)
				}
				w = nw
				continue
			}
			// an empty payload is the legacy header update; one that
			// does not decode is reported and named as librbd names an
			// unknown payload's op
			op := watchnotify.Op(unknownNotifyOp)
			if m, err := watchnotify.ParseNotify(ev.Payload); err != nil {
				fmt.Fprintln(c.stderr, "rbd: failed to decode image notification")
			} else {
				op = m.Op
			}
			fmt.Fprintf(c.stdout, "%s received notification: notify_id=%d, cookie=%d, notifier_id=%d, bl.length=%d, notify_op=%v\n",
				name, ev.NotifyID, w.ID(), ev.NotifierGID, len(ev.Payload), op)
			if err := w.Ack(ctx, ev, nil); err != nil {
				fmt.Fprintf(c.stderr, "rbd: acknowledging notification %d: %v\n", ev.NotifyID, err)
			}
		}
	}
}
