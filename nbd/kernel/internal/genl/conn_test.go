package genl

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"
)

// The controller family exists in every kernel with generic netlink: the
// test host's kernel is the peer here.
func TestResolveControllerLive(t *testing.T) {
	var sent, received int
	c, err := Dial(Options{Trace: func(s bool, _ []byte) {
		if s {
			sent++
		} else {
			received++
		}
	}})
	if err != nil {
		t.Fatalf("netlink socket: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := c.ResolveFamily(ctx, "nlctrl")
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != 0x10 || f.Version < 1 {
		t.Errorf("nlctrl: %+v", f)
	}
	if sent != 1 || received < 1 {
		t.Errorf("trace saw %d sent, %d received", sent, received)
	}
	// A family that does not exist.
	if _, err := c.ResolveFamily(ctx, "purerbd-nofam"); !errors.Is(err, ErrFamilyNotFound) {
		t.Errorf("missing family: %v", err)
	}
	// A name over GENL_NAMSIZ fails the policy; the kernel says so in an
	// extended acknowledgement.
	_, err = c.ResolveFamily(ctx, "purerbd-name-too-long-for-genl")
	var ne *Error
	if !errors.As(err, &ne) || ne.Errno != syscall.EINVAL {
		t.Errorf("long name: %v", err)
	} else {
		t.Logf("kernel said: %v", ne)
	}
	// A request the controller refuses comes back as *Error with errno.
	_, err = c.Execute(ctx, Request{Family: 0x10, Cmd: ctrlCmdGetFamily, Version: ctrlVersion})
	if !errors.As(err, &ne) || !errors.Is(err, syscall.EINVAL) {
		t.Errorf("request without a name: %v", err)
	}
	// The connection still works after an error.
	if _, err := c.ResolveFamily(ctx, "nlctrl"); err != nil {
		t.Errorf("after an error: %v", err)
	}
}

func TestExecuteHonoursContext(t *testing.T) {
	c, err := Dial(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.ResolveFamily(ctx, "nlctrl"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	// An expired deadline ends the exchange, and the next one works.
	ctx, cancel = context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	time.Sleep(time.Millisecond)
	if _, err := c.ResolveFamily(ctx, "nlctrl"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("expired context: %v", err)
	}
	if _, err := c.ResolveFamily(context.Background(), "nlctrl"); err != nil {
		t.Errorf("after an expired context: %v", err)
	}

	// Waiting for an answer that never comes ends with the context, and
	// a stale answer that arrives later is skipped by its sequence number.
	c.mu.Lock()
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.await(ctx, c.seq+1000, false)
	c.mu.Unlock()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("await: %v after %v", err, time.Since(start))
	}
	if _, err := c.ResolveFamily(context.Background(), "nlctrl"); err != nil {
		t.Errorf("after an abandoned wait: %v", err)
	}
}
