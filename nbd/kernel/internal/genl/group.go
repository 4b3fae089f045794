package genl

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrOverrun means the kernel dropped notifications for this socket: its
// receive buffer was full (ENOBUFS). What they said is lost.
var ErrOverrun = errors.New("genl: notifications lost (receive buffer overrun)")

// JoinGroup subscribes the socket to a family's multicast group (see
// Family.Groups); Receive then returns the group's notifications. Give
// notifications a socket of their own: Execute skips datagrams that do
// not answer it.
func (c *Conn) JoinGroup(id uint32) error {
	var serr error
	err := c.raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, int(id))
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("genl: joining multicast group %d: %w", id, err)
	}
	return nil
}

// Receive waits for the next datagram from the kernel, typically a
// notification of a group the socket joined, and returns its messages.
// The end of ctx ends the wait. After ErrOverrun the socket goes on
// receiving.
func (c *Conn) Receive(ctx context.Context) ([]Message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var msgs []Message
	err := c.bounded(ctx, func() error {
		d, err := c.receive()
		if errors.Is(err, unix.ENOBUFS) {
			return ErrOverrun
		}
		if err != nil {
			return err
		}
		msgs, err = ParseMessages(d)
		return err
	})
	if err != nil {
		return nil, err
	}
	return msgs, nil
}

// Group returns the ID of the family's multicast group called name.
func (f Family) Group(name string) (uint32, bool) {
	for _, g := range f.Groups {
		if g.Name == name {
			return g.ID, true
		}
	}
	return 0, false
}
