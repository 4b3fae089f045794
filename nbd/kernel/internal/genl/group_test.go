package genl

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestJoinGroupLive joins the controller's own multicast group (it
// announces families coming and going) on this machine's kernel: Receive
// then waits until its context ends, and a group the family does not
// have is refused.
func TestJoinGroupLive(t *testing.T) {
	c, err := Dial(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fam, err := c.ResolveFamily(context.Background(), "nlctrl")
	if err != nil {
		t.Fatal(err)
	}
	id, ok := fam.Group("notify")
	if !ok {
		t.Fatalf("nlctrl has no notify group: %+v", fam.Groups)
	}
	if _, ok := fam.Group("no-such-group"); ok {
		t.Error("Group found a group that does not exist")
	}
	n, err := Dial(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.JoinGroup(id); err != nil {
		t.Fatalf("joining nlctrl's notify group %d: %v", id, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	msgs, err := n.Receive(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive with nothing to receive: %v, %d messages", err, len(msgs))
	}
	if d := time.Since(t0); d < 100*time.Millisecond || d > 5*time.Second {
		t.Errorf("Receive returned after %v, want about 150ms", d)
	}
	if err := n.JoinGroup(1 << 30); err == nil {
		t.Error("joining a group that does not exist succeeded")
	}
}
