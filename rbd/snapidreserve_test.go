package rbd

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"
)

// snapCounts counts the snapshot ids allocated and released through
// the objects it wraps.
type snapCounts struct {
	objects
	mu       sync.Mutex
	next     uint64 // fake allocations when objects is nil
	alloc    []uint64
	released []uint64
}

func (c *snapCounts) allocSnap(ctx context.Context) (uint64, error) {
	var id uint64
	if c.objects == nil {
		c.mu.Lock()
		c.next++
		id = c.next
		c.mu.Unlock()
	} else {
		var err error
		if id, err = c.objects.allocSnap(ctx); err != nil {
			return 0, err
		}
	}
	c.mu.Lock()
	c.alloc = append(c.alloc, id)
	c.mu.Unlock()
	return id, nil
}

func (c *snapCounts) releaseSnap(ctx context.Context, snap uint64) error {
	c.mu.Lock()
	c.released = append(c.released, snap)
	c.mu.Unlock()
	if c.objects == nil {
		return nil
	}
	return c.objects.releaseSnap(ctx, snap)
}

func (c *snapCounts) poolID() int64 {
	if c.objects == nil {
		return 7
	}
	return c.objects.poolID()
}

func (c *snapCounts) counts() (alloc, released []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.alloc), slices.Clone(c.released)
}

// reservedID waits for r's allocation in pool to end and returns its id.
func reservedID(t *testing.T, r *SnapIDReserve, pool int64) uint64 {
	t.Helper()
	r.mu.Lock()
	res := r.pools[pool]
	r.mu.Unlock()
	if res == nil {
		t.Fatal("nothing reserved")
	}
	select {
	case <-res.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the reserved id's allocation did not end")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	return res.id
}

// TestSnapIDReserveTakes checks the reserve's bookkeeping without a
// cluster: the first take allocates on the spot and starts the next
// allocation, a take with that one done gets it, a take while it is
// still under way allocates its own, Close releases what is left, and a
// closed reserve allocates as if there were none.
func TestSnapIDReserveTakes(t *testing.T) {
	ctx := context.Background()
	o := &snapCounts{}
	r := NewSnapIDReserve(nil)
	id, reserved, err := r.take(ctx, o)
	if err != nil || reserved {
		t.Fatalf("first take: %d %v %v", id, reserved, err)
	}
	next := reservedID(t, r, 7)
	if id2, reserved, err := r.take(ctx, o); err != nil || !reserved || id2 != next {
		t.Fatalf("second take: %d reserved=%v %v; want the reserved %d", id2, reserved, err, next)
	}
	// the third finds the allocation started by the second under way
	// (held back here) and allocates its own
	r.mu.Lock()
	pending := &reservedSnapID{done: make(chan struct{}), objs: o}
	r.pools[7] = pending
	r.mu.Unlock()
	if _, reserved, err := r.take(ctx, o); err != nil || reserved {
		t.Fatalf("take with the allocation under way: reserved=%v %v", reserved, err)
	}
	pending.id = 100
	close(pending.done)
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, released := o.counts(); !slices.Equal(released, []uint64{100}) {
		t.Errorf("released at Close: %v, want [100]", released)
	}
	alloc, _ := o.counts()
	if _, reserved, err := r.take(ctx, o); err != nil || reserved {
		t.Fatalf("take after Close: reserved=%v %v", reserved, err)
	}
	if after, _ := o.counts(); len(after) != len(alloc)+1 {
		t.Errorf("take after Close allocated %d ids, want 1", len(after)-len(alloc))
	}
}

// TestSnapIDReserveSnapshots takes snapshots with a reserve on a real
// image: the second takes the id reserved after the first, its data is
// what was written before it (librbd's export of the snapshot), a
// reserved id made stale by librbd's snapshot of the image is released and
// replaced by a fresh one (librbd lists the ids in order), and Close
// releases the id left over.
func TestSnapIDReserveSnapshots(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	rbdCLI(t, "create", "--size", "8M", spec) // librbd's default features
	r := NewSnapIDReserve(nil)
	img := openT(t, name, OpenOptions{SnapIDs: r})
	o := &snapCounts{objects: img.data}
	img.data = o
	pool := o.poolID()

	before := bytes.Repeat([]byte("b"), 8192)
	if _, err := img.WriteAtContext(ctx, before, 4096); err != nil {
		t.Fatal(err)
	}
	if err := img.CreateSnapshot(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	r1 := reservedID(t, r, pool)
	if err := img.CreateSnapshot(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := img.WriteAtContext(ctx, bytes.Repeat([]byte("A"), 8192), 4096); err != nil {
		t.Fatal(err)
	}
	r2 := reservedID(t, r, pool)

	// librbd's snapshot of the image (asking this client, which holds
	// the exclusive lock, to release it) makes r2 stale for the image
	rbdCLI(t, "snap", "create", spec+"@c")
	if err := img.CreateSnapshot(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	r3 := reservedID(t, r, pool)
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var snaps []struct {
		ID   uint64 `json:"id"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(rbdCLI(t, "snap", "ls", "--format", "json", spec), &snaps); err != nil {
		t.Fatal(err)
	}
	ids := map[string]uint64{}
	var order []string
	for _, s := range snaps {
		ids[s.Name] = s.ID
		order = append(order, s.Name)
	}
	if !slices.Equal(order, []string{"a", "b", "c", "d"}) || !(ids["a"] < ids["b"] && ids["b"] < ids["c"] && ids["c"] < ids["d"]) {
		t.Fatalf("librbd lists %v", snaps)
	}
	if ids["b"] != r1 {
		t.Errorf("snapshot b has id %d, not the one reserved after a (%d)", ids["b"], r1)
	}
	if ids["d"] == r2 {
		t.Errorf("snapshot d took the stale id %d", r2)
	}
	_, released := o.counts()
	if !slices.Contains(released, r2) || !slices.Contains(released, r3) {
		t.Errorf("released %v; want the stale %d and the one left at Close %d", released, r2, r3)
	}
	got := rbdExport(t, spec+"@b")
	if want := append(make([]byte, 4096), before...); !bytes.Equal(got[:len(want)], want) {
		t.Errorf("librbd's export of b (taken with a reserved id) differs from what was written before it")
	}
}
