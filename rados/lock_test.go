package rados

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestAdvisoryLocks takes and releases exclusive locks from two clients
// and checks them with Ceph's rados tool (`rados lock info`): another
// client is refused, the holder renews, a release hands it over, and an
// expired lock can be taken by another.
func TestAdvisoryLocks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := connectTest(t)
	// the second client is closed before a's goroutine check (which
	// would count b's sessions, opened after a connected)
	b, err := Connect(ctx, Config{MonHost: cluster.MonHost(), Key: cluster.AdminKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ioa, iob := testIO(t, a, ""), testIO(t, b, "")
	const oid, name = "lock-obj", "op.lock"
	_ = ioa.Remove(ctx, oid)

	if err := ioa.LockExclusive(ctx, oid, name, "cookie-a", "held by a", LockOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := cluster.Rados(ctx, "-p", cluster.Pool, "lock", "info", oid, name)
	if err != nil || !strings.Contains(string(out), `"cookie":"cookie-a"`) || !strings.Contains(string(out), `"description":"held by a"`) ||
		!strings.Contains(string(out), `"type":"exclusive"`) {
		t.Fatalf("rados lock info: %s %v", out, err)
	}
	if err := iob.LockExclusive(ctx, oid, name, "cookie-b", "", LockOptions{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("another client took a held lock: %v", err)
	}
	if err := ioa.LockExclusive(ctx, oid, name, "cookie-a", "", LockOptions{}); !errors.Is(err, ErrExists) {
		t.Fatalf("the holder again without renew: %v", err)
	}
	if err := ioa.LockExclusive(ctx, oid, name, "cookie-a", "", LockOptions{Duration: 30 * time.Second, Renew: true}); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if err := iob.Unlock(ctx, oid, name, "cookie-b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unlock of a lock not held: %v", err)
	}
	if err := ioa.Unlock(ctx, oid, name, "cookie-a"); err != nil {
		t.Fatal(err)
	}
	// handed over, now with a duration, which expires
	if err := iob.LockExclusive(ctx, oid, name, "cookie-b", "", LockOptions{Duration: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := ioa.LockExclusive(ctx, oid, name, "cookie-a", "", LockOptions{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("a lock within its duration: %v", err)
	}
	time.Sleep(3 * time.Second)
	if err := ioa.LockExclusive(ctx, oid, name, "cookie-a", "", LockOptions{}); err != nil {
		t.Fatalf("an expired lock: %v", err)
	}
	// other names on the same object are other locks
	if err := iob.LockExclusive(ctx, oid, "other", "cookie-b", "", LockOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err = cluster.Rados(ctx, "-p", cluster.Pool, "lock", "list", oid)
	if err != nil || !strings.Contains(string(out), name) || !strings.Contains(string(out), "other") {
		t.Fatalf("rados lock list: %s %v", out, err)
	}

	// an ephemeral lock's object goes with its last locker
	const eph = "lock-ephemeral"
	_ = ioa.Remove(ctx, eph)
	if err := ioa.LockExclusive(ctx, eph, name, "cookie-a", "", LockOptions{Ephemeral: true, Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := iob.LockExclusive(ctx, eph, name, "cookie-b", "", LockOptions{Ephemeral: true}); !errors.Is(err, ErrBusy) {
		t.Fatalf("another client took a held ephemeral lock: %v", err)
	}
	if _, err := cluster.Rados(ctx, "-p", cluster.Pool, "stat", eph); err != nil {
		t.Fatalf("the ephemeral lock's object is not there while held: %v", err)
	}
	if err := ioa.Unlock(ctx, eph, name, "cookie-a"); err != nil {
		t.Fatal(err)
	}
	if out, err := cluster.Rados(ctx, "-p", cluster.Pool, "stat", eph); err == nil {
		t.Fatalf("the ephemeral lock's object outlived its lock: %s", out)
	}
}
