package rbd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/rados"
)

// radosLockInfo is `rados lock info` of a header lock, in its JSON.
type radosLockInfo struct {
	Name    string
	Type    string
	Tag     string
	Lockers []struct {
		Name, Cookie, Description, Expiration, Addr string
	}
}

func lockInfo(t *testing.T, oid, name string) radosLockInfo {
	t.Helper()
	out, err := cluster.Rados(ctxT(t), "-p", "rbd", "lock", "info", oid, name, "--format", "json")
	if err != nil {
		t.Fatalf("rados lock info %s %s: %v: %s", oid, name, err, out)
	}
	var li radosLockInfo
	if err := json.Unmarshal(out, &li); err != nil {
		t.Fatalf("rados lock info: %v: %s", err, out)
	}
	return li
}

// TestHeaderLock takes, lists, breaks and releases header locks with
// two clients, the rados tool as the oracle (and as a third client that
// takes a lock and exits); librbd's `rbd lock ls` does not see them.
func TestHeaderLock(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	if err := Create(ctx, testPool(t), name, 1<<20, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{})
	header := "rbd_header." + img.ID()
	const lock = "test_claim"
	l := HeaderLock{Name: lock, Cookie: "node-a", Tag: "purerbd", Description: "staged here"}

	if err := img.LockHeader(ctx, l); err != nil {
		t.Fatal(err)
	}
	li := lockInfo(t, header, lock)
	if li.Type != "exclusive" || li.Tag != "purerbd" || len(li.Lockers) != 1 ||
		li.Lockers[0].Cookie != "node-a" || li.Lockers[0].Description != "staged here" {
		t.Fatalf("rados lock info: %+v", li)
	}
	self := fmt.Sprintf("client.%d", conn.InstanceID())
	if li.Lockers[0].Name != self {
		t.Errorf("locker %s, this client is %s", li.Lockers[0].Name, self)
	}
	if out := rbdCLI(t, "lock", "ls", spec); len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("rbd lock ls shows a header lock: %s", out)
	}
	if err := img.LockHeader(ctx, l); !errors.Is(err, ErrExists) {
		t.Errorf("taking it again: %v, want ErrExists", err)
	}

	lockers, err := img.HeaderLockers(ctx, lock)
	if err != nil || len(lockers) != 1 {
		t.Fatalf("HeaderLockers: %+v %v", lockers, err)
	}
	lk := lockers[0]
	if lk.Client != self || lk.Cookie != "node-a" || lk.Tag != "purerbd" || lk.Description != "staged here" ||
		!lk.Expires.IsZero() || lk.Address != li.Lockers[0].Addr {
		t.Errorf("HeaderLockers: %+v; rados lock info: %+v", lk, li.Lockers[0])
	}
	ws, err := img.Watchers(ctx)
	if err != nil || len(ws) != 1 || !lk.HeldBy(ws[0]) {
		t.Errorf("the locker is not the header's watcher %+v (%v)", ws, err)
	}

	// another client is refused while the lock is held
	other, err := rados.Connect(ctx, rados.Config{MonHost: strings.Join(cluster.MonAddrs, ","), Key: cluster.AdminKey})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	oio, err := other.IOContext(ctx, cluster.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	img2, err := Open(ctx, oio, name, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer img2.Close()
	if err := img2.LockHeader(ctx, HeaderLock{Name: lock, Cookie: "node-b", Tag: "purerbd"}); !errors.Is(err, ErrBusy) {
		t.Fatalf("a second client took a held lock: %v", err)
	}
	// it breaks the first client's hold and takes the lock
	if err := img2.BreakHeaderLock(ctx, lock, lk.Client, lk.Cookie); err != nil {
		t.Fatal(err)
	}
	if err := img2.BreakHeaderLock(ctx, lock, lk.Client, lk.Cookie); !errors.Is(err, ErrNotFound) {
		t.Errorf("breaking a broken hold: %v, want ErrNotFound", err)
	}
	if err := img2.LockHeader(ctx, HeaderLock{Name: lock, Cookie: "node-b", Tag: "purerbd"}); err != nil {
		t.Fatal(err)
	}
	if li := lockInfo(t, header, lock); len(li.Lockers) != 1 || li.Lockers[0].Cookie != "node-b" ||
		li.Lockers[0].Name != fmt.Sprintf("client.%d", other.InstanceID()) {
		t.Errorf("rados lock info after the takeover: %+v", li)
	}
	if err := img2.UnlockHeader(ctx, lock, "node-b"); err != nil {
		t.Fatal(err)
	}
	if err := img2.UnlockHeader(ctx, lock, "node-b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unlocking twice: %v, want ErrNotFound", err)
	}
	if li := lockInfo(t, header, lock); len(li.Lockers) != 0 {
		t.Errorf("rados lock info after unlock: %+v", li)
	}

	// a hold of a client that has exited: listed, held by no watcher,
	// broken
	out, err := cluster.Rados(ctx, "-p", "rbd", "lock", "get", header, lock,
		"--lock-cookie", "node-dead", "--lock-tag", "purerbd", "--lock-type", "exclusive")
	if err != nil {
		t.Fatalf("rados lock get: %v: %s", err, out)
	}
	lockers, err = img.HeaderLockers(ctx, lock)
	if err != nil || len(lockers) != 1 || lockers[0].Cookie != "node-dead" {
		t.Fatalf("HeaderLockers of rados' lock: %+v %v", lockers, err)
	}
	ws, err = img.Watchers(ctx)
	if err != nil || len(ws) != 2 {
		t.Fatalf("watchers: %+v %v", ws, err)
	}
	for _, w := range ws {
		if lockers[0].HeldBy(w) {
			t.Errorf("the exited rados tool's hold is held by watcher %+v", w)
		}
	}
	if err := img.BreakHeaderLock(ctx, lock, lockers[0].Client, lockers[0].Cookie); err != nil {
		t.Fatal(err)
	}
	if li := lockInfo(t, header, lock); len(li.Lockers) != 0 {
		t.Errorf("rados lock info after breaking: %+v", li)
	}
	if lockers, err := img.HeaderLockers(ctx, lock); err != nil || len(lockers) != 0 {
		t.Errorf("HeaderLockers after breaking: %+v %v", lockers, err)
	}

	// what is refused
	ro := openT(t, name, OpenOptions{ReadOnly: true})
	if err := ro.LockHeader(ctx, l); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only image: %v, want ErrReadOnly", err)
	}
	if err := img.LockHeader(ctx, HeaderLock{Name: lockName, Cookie: "x"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("the exclusive lock's name: %v, want ErrInvalid", err)
	}
	if err := img.BreakHeaderLock(ctx, lock, "nobody", "x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("breaking for a bad client name: %v, want ErrInvalid", err)
	}
}
