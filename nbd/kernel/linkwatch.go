package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/purerbd/purerbd/nbd/kernel/internal/genl"
)

// LinkWatcher receives the kernel's LINK_DEAD notifications. The nbd
// driver sends one whenever it gives up on a connection of a device that
// nobody asked to disconnect: a request on it outlived the request
// timeout (the driver then resends the request on another connection),
// or the server's end of the socket closed or broke. A Device watches
// for its own and replaces such connections; tools can watch every
// device.
type LinkWatcher struct {
	conn    *genl.Conn
	pending []int
}

// WatchLinks subscribes to LINK_DEAD notifications, on a netlink socket
// of the watcher's own. Close the watcher when done.
func (c *Client) WatchLinks() (*LinkWatcher, error) {
	id, ok := c.family.Group(mcastGroup)
	if !ok {
		return nil, fmt.Errorf("nbd: the kernel's nbd family has no %q multicast group", mcastGroup)
	}
	conn, err := genl.Dial(genl.Options{Trace: c.trace})
	if err != nil {
		return nil, fmt.Errorf("nbd: watching links: %w", err)
	}
	if err := conn.JoinGroup(id); err != nil {
		conn.Close()
		return nil, fmt.Errorf("nbd: watching links: %w", err)
	}
	return &LinkWatcher{conn: conn}, nil
}

// Next waits for the next LINK_DEAD notification and returns the index of
// the device it names. ErrNotificationsLost means the kernel dropped some
// (the watcher goes on working); the end of ctx ends the wait.
func (w *LinkWatcher) Next(ctx context.Context) (int, error) {
	for len(w.pending) == 0 {
		msgs, err := w.conn.Receive(ctx)
		if errors.Is(err, genl.ErrOverrun) {
			return AnyIndex, ErrNotificationsLost
		}
		if err != nil {
			return AnyIndex, fmt.Errorf("nbd: waiting for link notifications: %w", err)
		}
		if w.pending, err = parseLinkDead(msgs); err != nil {
			return AnyIndex, fmt.Errorf("nbd: %w", err)
		}
	}
	i := w.pending[0]
	w.pending = w.pending[1:]
	return i, nil
}

// Close ends the subscription.
func (w *LinkWatcher) Close() error { return w.conn.Close() }
