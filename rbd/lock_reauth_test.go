package rbd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/radostest"
)

// TestLockOwnerSurvivesNewGlobalID: the lock owner's client loses its
// monitor and OSD for longer than its tickets live, so it comes back
// under a new global id. A second client wanting the lock must see the
// owner alive (librbd matches the locker's address and watch cookie, not
// its name), ask for the lock instead of blocklisting the owner, and the
// owner must be able to release a lock filed under its old name.
func TestLockOwnerSurvivesNewGlobalID(t *testing.T) {
	const authTTL = 8 * time.Second
	cl := radostest.New(t, radostest.Options{Conf: map[string]string{
		"auth_service_ticket_ttl":  fmt.Sprint((authTTL / 2).Seconds()),
		"auth_mon_ticket_ttl":      fmt.Sprint(authTTL.Seconds()),
		"osd_client_watch_timeout": "10",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	connect := func() (*rados.Conn, *rados.IOContext) {
		c, err := rados.Connect(ctx, rados.Config{MonHost: strings.Join(cl.MonAddrs, ","), Key: cl.AdminKey})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		io, err := c.IOContext(ctx, cl.Pool, "")
		if err != nil {
			t.Fatal(err)
		}
		return c, io
	}
	type watcher struct {
		Address string
		Client  uint64
	}
	watchers := func() []watcher {
		out, err := cl.Rbd(ctx, "status", "--format", "json", cl.Pool+"/reauth")
		if err != nil {
			t.Fatalf("rbd status: %v: %s", err, out)
		}
		var st struct{ Watchers []watcher }
		if err := json.Unmarshal(out, &st); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return st.Watchers
	}

	connA, ioA := connect()
	if err := Create(ctx, ioA, "reauth", 4<<20, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	a, err := Open(ctx, ioA, "reauth", OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.WriteAtContext(ctx, []byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	before := watchers()
	if len(before) != 1 {
		t.Fatalf("watchers before: %+v", before)
	}
	gid := connA.InstanceID()

	for _, d := range []string{"osd.0", "mon.a"} {
		if err := cl.Stop(d); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(authTTL + 4*time.Second)
	for _, d := range []string{"mon.a", "osd.0"} {
		if err := cl.Start(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.WaitQuorum(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitOSDsUp(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		w := watchers()
		if len(w) == 1 && w[0].Client != before[0].Client {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no single watch of client A under a new global id: %+v (before %+v)", w, before)
		}
		time.Sleep(time.Second)
	}
	if connA.InstanceID() == gid {
		t.Fatalf("client A kept global id %d; the test needs a new one", gid)
	}

	_, ioB := connect()
	b, err := Open(ctx, ioB, "reauth", OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.WriteAtContext(ctx, []byte("b"), 4096); err != nil {
		t.Fatalf("client B's write: %v", err)
	}
	out, err := cl.Ceph(ctx, "osd", "blocklist", "ls")
	if err != nil {
		t.Fatalf("ceph osd blocklist ls: %v: %s", err, out)
	}
	if addr := strings.TrimPrefix(before[0].Address, "v1:"); strings.Contains(string(out), strings.TrimPrefix(addr, "v2:")) {
		t.Fatalf("client A, alive under a new global id, was blocklisted: %s", out)
	}
	buf := make([]byte, 1)
	if _, err := a.ReadAtContext(ctx, buf, 0); err != nil || buf[0] != 'a' {
		t.Fatalf("client A after the handover: read %q, %v", buf, err)
	}
	if a.IsLockOwner() || !b.IsLockOwner() {
		t.Fatalf("lock owners after the handover: A %v, B %v", a.IsLockOwner(), b.IsLockOwner())
	}
}
