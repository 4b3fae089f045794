package rbd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"
)

// rbdJSON runs Ceph's rbd with --format json and decodes its output.
func rbdJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := rbdCLI(t, append(args, "--format", "json")...)
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("rbd %v: %v: %s", args, err, out)
	}
}

type rbdGroupImage struct {
	Image, Pool, Namespace string
	State                  int
}

type rbdGroupSnap struct {
	Snapshot, State string
}

type rbdSnap struct {
	ID        uint64
	Name      string
	Namespace struct {
		Type      string
		Pool      string
		Group     string
		GroupSnap string `json:"group snap"`
	}
}

// TestGroupsBothWays makes groups, members and group snapshots with each
// tool and reads and removes them with the other: librbd's group seen by
// purerbd, purerbd's by rbd group ... --format json and rbd snap ls --all;
// a group snapshot purerbd took while another client held a member's
// lock and wrote to it holds the data written before it, as librbd's
// rollback and rbd export show, and purerbd's rollback too (while the
// writer still has the image open).
func TestGroupsBothWays(t *testing.T) {
	ctx := ctxT(t)
	pool := testPool(t)
	name := imageName(t)
	cg, pg := name+"-cg", name+"-pg"
	a, b, c, d, e, f := name+"-a", name+"-b", name+"-c", name+"-d", name+"-e", name+"-f"
	for _, img := range []string{a, b, c, d, e, f} {
		rbdCLI(t, "create", "--size", "8M", "rbd/"+img)
	}

	// librbd's group, read by purerbd
	rbdCLI(t, "group", "create", "rbd/"+cg)
	rbdCLI(t, "group", "image", "add", "rbd/"+cg, "rbd/"+a)
	rbdCLI(t, "group", "image", "add", "rbd/"+cg, "rbd/"+b)
	rbdCLI(t, "group", "snap", "create", "rbd/"+cg+"@s1")
	groups, err := ListGroups(ctx, pool)
	if err != nil || !slices.Contains(groups, cg) {
		t.Fatalf("ListGroups = %v, %v", groups, err)
	}
	members, err := GroupImages(ctx, pool, cg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range members {
		names = append(names, m.Name)
		if m.State != GroupImageAttached || m.Pool != "rbd" || m.ID == "" {
			t.Errorf("member %+v", m)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{a, b}) {
		t.Errorf("members of rbd's group: %v", names)
	}
	snaps, err := GroupSnapshots(ctx, pool, cg)
	if err != nil || len(snaps) != 1 || snaps[0].Name != "s1" || snaps[0].State != GroupSnapComplete || len(snaps[0].Images) != 2 {
		t.Fatalf("GroupSnapshots of rbd's group = %+v, %v", snaps, err)
	}

	// purerbd's group, read by librbd; the snapshot is taken while
	// another client holds c's lock and writes to it
	if err := CreateGroup(ctx, pool, pg); err != nil {
		t.Fatal(err)
	}
	for _, img := range []string{c, d, e} {
		if err := AddGroupImage(ctx, pool, pg, pool, img); err != nil {
			t.Fatal(err)
		}
	}
	if err := AddGroupImage(ctx, pool, pg, pool, c); err != nil {
		t.Errorf("adding a member again: %v", err)
	}
	_, writer := lockOnOtherClient(t, ctx, c)
	before := bytes.Repeat([]byte("before"), 1000)
	if _, err := writer.WriteAtContext(ctx, before, 4096); err != nil {
		t.Fatal(err)
	}
	if err := CreateGroupSnapshot(ctx, pool, pg, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.WriteAtContext(ctx, bytes.Repeat([]byte("after!"), 1000), 4096); err != nil {
		t.Fatal(err)
	}
	var imgs []rbdGroupImage
	rbdJSON(t, &imgs, "group", "image", "ls", "rbd/"+pg)
	names = nil
	for _, m := range imgs {
		names = append(names, m.Image)
		if m.State != 0 || m.Pool != "rbd" {
			t.Errorf("rbd group image ls: %+v", m)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{c, d, e}) {
		t.Errorf("rbd group image ls of purerbd's group: %v", names)
	}
	var gsnaps []rbdGroupSnap
	rbdJSON(t, &gsnaps, "group", "snap", "ls", "rbd/"+pg)
	if len(gsnaps) != 1 || gsnaps[0] != (rbdGroupSnap{"s1", "ok"}) {
		t.Errorf("rbd group snap ls of purerbd's group: %+v", gsnaps)
	}
	var isnaps []rbdSnap
	rbdJSON(t, &isnaps, "snap", "ls", "--all", "rbd/"+c)
	if len(isnaps) != 1 || isnaps[0].Namespace.Type != "group" || isnaps[0].Namespace.Group != pg ||
		isnaps[0].Namespace.GroupSnap != "s1" || isnaps[0].Namespace.Pool != "rbd" {
		t.Fatalf("rbd snap ls --all of a member: %+v", isnaps)
	}
	cid, err := ImageID(ctx, pool, c)
	if err != nil {
		t.Fatal(err)
	}
	psnaps, err := GroupSnapshots(ctx, pool, pg)
	if err != nil || len(psnaps) != 1 || len(psnaps[0].Images) != 3 {
		t.Fatalf("GroupSnapshots of purerbd's group = %+v, %v", psnaps, err)
	}
	for _, is := range psnaps[0].Images {
		if is.ImageID == cid && is.SnapID != isnaps[0].ID {
			t.Errorf("the group snapshot records snapshot %d of c, rbd lists %d", is.SnapID, isnaps[0].ID)
		}
	}
	// librbd reads a snapshot of the group namespace by name only
	// through a rollback
	if err := writer.Close(); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "group", "snap", "rollback", "--no-progress", "rbd/"+pg+"@s1")
	want := make([]byte, 8<<20)
	copy(want, "first") // lockOnOtherClient's write
	copy(want[4096:], before)
	mustEqual(t, "rbd export after librbd's rollback to purerbd's group snapshot", rbdExport(t, "rbd/"+c), want)
	writer = openT(t, c, OpenOptions{})
	if _, err := writer.WriteAtContext(ctx, bytes.Repeat([]byte("again!"), 1000), 4096); err != nil {
		t.Fatal(err)
	}

	// refusals
	if err := AddGroupImage(ctx, pool, cg, pool, c); !errors.Is(err, ErrInGroup) || !errors.Is(err, ErrExists) {
		t.Errorf("adding a member of another group: %v", err)
	}
	if err := CreateGroup(ctx, pool, pg); !errors.Is(err, ErrExists) {
		t.Errorf("creating an existing group: %v", err)
	}
	if _, err := GroupImages(ctx, pool, name+"-nosuch"); !errors.Is(err, ErrGroupNotFound) || !errors.Is(err, ErrNotFound) {
		t.Errorf("listing a missing group: %v", err)
	}
	if err := CreateGroupSnapshot(ctx, pool, pg, "s1"); !errors.Is(err, ErrExists) {
		t.Errorf("taking an existing group snapshot: %v", err)
	}
	if err := RemoveGroupSnapshot(ctx, pool, pg, "nosuch"); !errors.Is(err, ErrNotFound) {
		t.Errorf("removing a missing group snapshot: %v", err)
	}
	if err := AddGroupImage(ctx, pool, pg, pool, f); err != nil {
		t.Fatal(err)
	}
	if err := Remove(ctx, pool, f, RemoveOptions{}); !errors.Is(err, ErrInGroup) {
		t.Errorf("removing a member image: %v", err)
	}

	// renames, and a rollback, seen by the other tool
	if err := RenameGroupSnapshot(ctx, pool, pg, "s1", "s2"); err != nil {
		t.Fatal(err)
	}
	if err := RenameGroupSnapshot(ctx, pool, pg, "s2", "s2"); !errors.Is(err, ErrExists) {
		t.Errorf("renaming a group snapshot to itself: %v", err)
	}
	if err := RenameGroup(ctx, pool, pg, pg+"2"); err != nil {
		t.Fatal(err)
	}
	pg += "2"
	rbdJSON(t, &gsnaps, "group", "snap", "ls", "rbd/"+pg)
	if len(gsnaps) != 1 || gsnaps[0].Snapshot != "s2" {
		t.Errorf("rbd group snap ls after the renames: %+v", gsnaps)
	}
	if err := RollbackGroupSnapshot(ctx, pool, pg, "s2"); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "rbd export after purerbd's group rollback", rbdExport(t, "rbd/"+c), want)
	if err := writer.Close(); err != nil {
		t.Fatal(err)
	}

	// each tool removes what the other made
	if err := RemoveGroupSnapshot(ctx, pool, cg, "s1"); err != nil {
		t.Fatal(err)
	}
	rbdJSON(t, &isnaps, "snap", "ls", "--all", "rbd/"+a)
	if len(isnaps) != 0 {
		t.Errorf("rbd's member snapshot left: %+v", isnaps)
	}
	rbdCLI(t, "group", "snap", "rm", "rbd/"+pg+"@s2")
	if snaps, err := GroupSnapshots(ctx, pool, pg); err != nil || len(snaps) != 0 {
		t.Errorf("after rbd group snap rm: %+v %v", snaps, err)
	}
	rbdCLI(t, "group", "snap", "create", "rbd/"+cg+"@s3")
	if err := RemoveGroup(ctx, pool, cg); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "rm", "--no-progress", "rbd/"+a)
	rbdCLI(t, "group", "rm", "rbd/"+pg)
	if groups, err := ListGroups(ctx, pool); err != nil || slices.Contains(groups, pg) || slices.Contains(groups, cg) {
		t.Errorf("groups left: %v %v", groups, err)
	}
	for _, img := range []string{e, f} {
		if err := Remove(ctx, pool, img, RemoveOptions{}); err != nil {
			t.Errorf("removing a former member: %v", err)
		}
	}
	if err := RemoveGroup(ctx, pool, cg); !errors.Is(err, ErrGroupNotFound) {
		t.Errorf("removing a removed group: %v", err)
	}
}

// TestGroupSnapshotWhileLibrbdWrites takes a group snapshot while rbd
// bench (librbd) holds a member's exclusive lock and writes to it: the
// lock is asked for, handed over and taken back by librbd, whose writes
// all succeed; the member's snapshot object map matches its data, as
// librbd's object-map check sees after a rollback to it.
func TestGroupSnapshotWhileLibrbdWrites(t *testing.T) {
	ctx := ctxT(t)
	pool := testPool(t)
	name := imageName(t)
	a, b := name+"-a", name+"-b"
	for _, img := range []string{a, b} {
		rbdCLI(t, "create", "--size", "16M", "--object-size", "1M", "rbd/"+img)
	}
	if err := CreateGroup(ctx, pool, name); err != nil {
		t.Fatal(err)
	}
	for _, img := range []string{a, b} {
		if err := AddGroupImage(ctx, pool, name, pool, img); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, err := cluster.Rbd(cctx, "bench", "--io-type", "write", "--io-size", "4K", "--io-threads", "1",
			"--io-total", "256M", "--io-pattern", "rand", "rbd/"+a)
		done <- err
	}()
	// wait for librbd to hold the lock
	for i := 0; ; i++ {
		if len(bytes.TrimSpace(rbdCLI(t, "lock", "ls", "rbd/"+a))) > 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("rbd bench ended (%v) before its lock was seen", err)
		default:
		}
		if i == 100 {
			t.Fatal("rbd bench never took the lock")
		}
		time.Sleep(50 * time.Millisecond)
	}
	start := time.Now()
	if err := CreateGroupSnapshot(ctx, pool, name, "s"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("rbd bench ended before the group snapshot was taken")
	default:
	}
	t.Logf("group snapshot taken in %v while rbd bench wrote", time.Since(start))
	if err := <-done; err != nil {
		t.Fatalf("rbd bench: %v", err)
	}
	var gsnaps []rbdGroupSnap
	rbdJSON(t, &gsnaps, "group", "snap", "ls", "rbd/"+name)
	if len(gsnaps) != 1 || gsnaps[0] != (rbdGroupSnap{"s", "ok"}) {
		t.Fatalf("rbd group snap ls: %+v", gsnaps)
	}
	if err := RollbackGroupSnapshot(ctx, pool, name, "s"); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "object-map", "check", "rbd/"+a)
	rbdCLI(t, "group", "rm", "rbd/"+name)
}

// TestGroupSnapshotFailureCleansUp makes one member refuse purerbd (it
// has the journaling feature): the group snapshot fails naming the
// feature and leaves neither a record nor snapshots behind, as librbd
// cleans up after a failed group snapshot.
func TestGroupSnapshotFailureCleansUp(t *testing.T) {
	ctx := ctxT(t)
	pool := testPool(t)
	name := imageName(t)
	a, b := name+"-a", name+"-b"
	for _, img := range []string{a, b} {
		rbdCLI(t, "create", "--size", "4M", "rbd/"+img)
	}
	rbdCLI(t, "feature", "enable", "rbd/"+b, "journaling")
	rbdCLI(t, "group", "create", "rbd/"+name)
	for _, img := range []string{a, b} {
		rbdCLI(t, "group", "image", "add", "rbd/"+name, "rbd/"+img)
	}
	if err := CreateGroupSnapshot(ctx, pool, name, "s"); !errors.Is(err, ErrUnsupportedFeature) {
		t.Fatalf("a group snapshot of a journaling member: %v", err)
	}
	var gsnaps []rbdGroupSnap
	rbdJSON(t, &gsnaps, "group", "snap", "ls", "rbd/"+name)
	if len(gsnaps) != 0 {
		t.Errorf("group snapshot record left: %+v", gsnaps)
	}
	for _, img := range []string{a, b} {
		var snaps []rbdSnap
		rbdJSON(t, &snaps, "snap", "ls", "--all", "rbd/"+img)
		if len(snaps) != 0 {
			t.Errorf("snapshots left on %s: %+v", img, snaps)
		}
	}
	// librbd, which has the feature, takes it
	rbdCLI(t, "group", "snap", "create", "rbd/"+name+"@s")
}
