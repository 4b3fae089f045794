package rbd

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
)

// TestFencedClientLockTakeover: a client holding the exclusive lock goes
// without unlocking (its watch stays registered on the OSD until
// osd_client_watch_timeout, 10 s on this cluster). Its successor, which
// knows the dead client's address (rados.Conn.ClientAddr, recorded while
// it lived), blocklists exactly that instance and opens with it in
// FencedClients: the lock is broken at once. Without the mechanism the
// successor would wait for the watch to time out, which the 8 s context
// does not allow. The address must be the one the OSD files the lock and
// the watch under (`rbd lock ls`, `rbd status` as oracles).
func TestFencedClientLockTakeover(t *testing.T) {
	ctx := ctxT(t)
	name, other := imageLockedByOther(t, ctx)
	addr := other.ClientAddr()

	var locks []struct{ Address string }
	if err := json.Unmarshal(rbdCLI(t, "lock", "ls", "--format", "json", "rbd/"+name), &locks); err != nil || len(locks) != 1 {
		t.Fatalf("rbd lock ls: %v %+v", err, locks)
	}
	lockAddr, err := denc.ParseEntityAddr(locks[0].Address)
	if err != nil || !lockAddr.SameInstance(addr) {
		t.Fatalf("ClientAddr %s, but the lock is filed under %s (%v)", addr, locks[0].Address, err)
	}
	var st struct{ Watchers []struct{ Address string } }
	if err := json.Unmarshal(rbdCLI(t, "status", "--format", "json", "rbd/"+name), &st); err != nil || len(st.Watchers) != 1 {
		t.Fatalf("rbd status: %v %+v", err, st)
	}
	if w, err := denc.ParseEntityAddr(st.Watchers[0].Address); err != nil || !w.SameInstance(addr) {
		t.Fatalf("ClientAddr %s, but the watch is filed under %s (%v)", addr, st.Watchers[0].Address, err)
	}

	_ = other.Close() // gone without unlocking: the lock stays, the watch until it times out

	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	if err := conn.Blocklist(tctx, addr, 0); err != nil {
		t.Fatal(err)
	}
	fenced := time.Since(start)
	img, err := Open(tctx, testPool(t), name, OpenOptions{AcquireLock: true, FencedClients: []denc.EntityAddr{addr}})
	if err != nil {
		t.Fatalf("open after fencing the dead owner: %v", err)
	}
	defer img.Close()
	if _, err := img.WriteAtContext(tctx, []byte("second"), 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("blocklisted in %v, lock taken and first write done %v after the owner died", fenced.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	bl, err := cluster.Ceph(ctx, "osd", "blocklist", "ls")
	if err != nil {
		t.Fatal(err)
	}
	want := addr
	want.Type = denc.AddrAny
	if !strings.Contains(string(bl), want.String()) {
		t.Errorf("osd blocklist ls does not list %s: %s", want, bl)
	}
}

// TestFencingUnderWayLockTakeover: as TestFencedClientLockTakeover, but
// the successor opens while its fencing is still under way
// (OpenOptions.Fencing): the image opens, waits for the fencing before
// it breaks the dead owner's lock, and breaks it at once after.
func TestFencingUnderWayLockTakeover(t *testing.T) {
	ctx := ctxT(t)
	name, other := imageLockedByOther(t, ctx)
	addr := other.ClientAddr()
	_ = other.Close() // gone without unlocking

	tctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	fenced := make(chan struct{})
	var fenceErr error
	go func() {
		time.Sleep(200 * time.Millisecond) // the monitors taking their time
		fenceErr = conn.Blocklist(tctx, addr, 0)
		close(fenced)
	}()
	var waited atomic.Int32
	img, err := Open(tctx, testPool(t), name, OpenOptions{AcquireLock: true, Fencing: func(ctx context.Context) ([]denc.EntityAddr, error) {
		waited.Add(1)
		select {
		case <-fenced:
			return []denc.EntityAddr{addr}, fenceErr
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}})
	if err != nil {
		t.Fatalf("open while fencing the dead owner: %v", err)
	}
	defer img.Close()
	select {
	case <-fenced:
	default:
		t.Fatal("the lock was taken before the fencing ended")
	}
	if fenceErr != nil {
		t.Fatal(fenceErr)
	}
	if waited.Load() == 0 {
		t.Error("the open never waited for the fencing")
	}
	if _, err := img.WriteAtContext(tctx, []byte("second"), 0); err != nil {
		t.Fatal(err)
	}
}

// imageLockedByOther creates an image whose exclusive lock another
// client holds, and returns the image's name and that client.
func imageLockedByOther(t *testing.T, ctx context.Context) (string, *rados.Conn) {
	t.Helper()
	name := imageName(t)
	if err := Create(ctx, testPool(t), name, 4<<20, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	other, _ := lockOnOtherClient(t, ctx, name)
	return name, other
}
