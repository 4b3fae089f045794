package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// watch and notify: the rados tool's watcher, which prints every
// notification and echoes its payload back as the reply, and its
// notifier, which sends a string and prints the replies.

// notifyTimeout is how long notify waits for the watchers (the rados
// tool passes 10 s to notify2).
const notifyTimeout = 10 * time.Second

// unwatchTimeout bounds the unwatch at exit, which must run also when
// the verb's context was cancelled (SIGINT).
const unwatchTimeout = 10 * time.Second

// watch watches oid until a byte (enter) or the end of standard input
// arrives, or the context ends. Each notification is printed as the
// rados tool's watcher prints it — "NOTIFY cookie C notify_id N from
// GID" and a hexdump of the payload — and acknowledged with the payload
// as the reply; the loss of the watch is printed as "ERROR cookie C err
// (N) text", after which the verb still waits for enter.
func (c *radosCommand) watch(ctx context.Context, oid string) error {
	w, err := c.io.Watch(ctx, oid)
	if err != nil {
		return fmt.Errorf("error calling watch: %s", errnoText(err))
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unwatchTimeout)
		defer cancel()
		_ = w.Close(uctx)
	}()
	fmt.Fprintln(c.stdout, "press enter to exit...")
	// The read may outlast the verb when the context ends first; it
	// holds nothing but the reader, as getchar holds stdin.
	enter := make(chan struct{})
	go func() {
		var b [1]byte
		_, _ = io.ReadFull(c.stdin, b[:])
		close(enter)
	}()
	events := w.Events()
	for {
		select {
		case <-enter:
			return nil
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Err != nil {
				fmt.Fprintf(c.stdout, "ERROR cookie %d err %s\n", w.ID(), errnoText(ev.Err))
				continue
			}
			fmt.Fprintf(c.stdout, "NOTIFY cookie %d notify_id %d from %d\n", w.ID(), ev.NotifyID, ev.NotifierGID)
			hexdump(c.stdout, ev.Payload)
			if err := w.Ack(ctx, ev, ev.Payload); err != nil && ctx.Err() == nil {
				// librados' notify_ack reports nothing; the notifier
				// will list this watcher as timed out
				c.g.logger(slog.LevelWarn).Debug("rados watch: acknowledging a notify", "oid", oid, "notify_id", ev.NotifyID, "err", err)
			}
		}
	}
}

// notify sends message to oid's watchers, encoded as the rados tool
// encodes a string (a 32-bit length, then the bytes), waits for them and
// prints each reply — "reply client.GID cookie C : N bytes" and a
// hexdump of a non-empty one — then each watcher that did not answer:
// "timeout client.GID cookie C". When some timed out the verb fails,
// after printing.
func (c *radosCommand) notify(ctx context.Context, args []string) error {
	oid, msg := args[0], args[1]
	payload := binary.LittleEndian.AppendUint32(nil, uint32(len(msg)))
	payload = append(payload, msg...)
	res, err := c.io.Notify(ctx, oid, payload, notifyTimeout)
	if res != nil {
		for _, a := range res.Acks {
			fmt.Fprintf(c.stdout, "reply client.%d cookie %d : %d bytes\n", a.GID, a.Cookie, len(a.Reply))
			hexdump(c.stdout, a.Reply)
		}
		for _, m := range res.TimedOut {
			fmt.Fprintf(c.stdout, "timeout client.%d cookie %d\n", m.GID, m.Cookie)
		}
	}
	if err != nil {
		return fmt.Errorf("error calling notify: %s", errnoText(err))
	}
	return nil
}
