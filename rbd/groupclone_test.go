package rbd

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"
)

// TestCloneGroupSnapshotMember clones the member of a group snapshot by
// its snapshot id (no user snapshot name reaches it) and removes the
// group snapshot under the clone: librbd reads the clone (rbd export) as
// the member was; the member waits in the snapshot trash (rbd snap ls
// --all), as librbd's group snap rm leaves it (checked on a group
// snapshot of librbd's too), and goes when the clone is removed.
func TestCloneGroupSnapshotMember(t *testing.T) {
	ctx := ctxT(t)
	pool := testPool(t)
	name := imageName(t)
	a, clone := name+"-a", name+"-clone"
	data := make([]byte, 4<<20)
	rand.Read(data)
	rbdImport(t, data, "rbd/"+a)
	rbdCLI(t, "group", "create", "rbd/"+name)
	rbdCLI(t, "group", "image", "add", "rbd/"+name, "rbd/"+a)
	if err := CreateGroupSnapshot(ctx, pool, name, "s"); err != nil {
		t.Fatal(err)
	}
	img := openT(t, a, OpenOptions{})
	if _, err := img.WriteAt(bytes.Repeat([]byte{0xa5}, 1<<20), 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}

	var snaps []rbdSnap
	rbdJSON(t, &snaps, "snap", "ls", "--all", "rbd/"+a)
	if len(snaps) != 1 || snaps[0].Namespace.Type != "group" {
		t.Fatalf("snapshots of %s: %+v", a, snaps)
	}
	member := snaps[0]
	if err := Clone(ctx, pool, a, member.Name, pool, clone, CreateOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Clone by the member's name: %v, want ErrNotFound (not a user snapshot)", err)
	}
	if err := CloneFromSnapID(ctx, pool, a, member.ID+100, pool, clone, CreateOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("CloneFromSnapID of a missing id: %v", err)
	}
	if err := CloneFromSnapID(ctx, pool, a, member.ID, pool, clone, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rbdExport(t, "rbd/"+clone), data) {
		t.Fatal("the clone does not hold the member's data")
	}

	if err := RemoveGroupSnapshot(ctx, pool, name, "s"); err != nil {
		t.Fatalf("removing a group snapshot whose member has a clone: %v", err)
	}
	snaps = nil
	rbdJSON(t, &snaps, "snap", "ls", "--all", "rbd/"+a)
	if len(snaps) != 1 || snaps[0].ID != member.ID || snaps[0].Namespace.Type != "trash" {
		t.Fatalf("after the group snapshot's removal, snapshots of %s: %+v (want the member in the trash)", a, snaps)
	}
	if err := CloneFromSnapID(ctx, pool, a, member.ID, pool, clone+"2", CreateOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("CloneFromSnapID of a trashed snapshot: %v", err)
	}
	if !bytes.Equal(rbdExport(t, "rbd/"+clone), data) {
		t.Fatal("the clone changed with its parent snapshot in the trash")
	}
	rbdCLI(t, "rm", "--no-progress", "rbd/"+clone)
	snaps = nil
	rbdJSON(t, &snaps, "snap", "ls", "--all", "rbd/"+a)
	if len(snaps) != 0 {
		t.Fatalf("after librbd removed the clone, snapshots of %s: %+v", a, snaps)
	}

	// librbd does the same with the member of its own group snapshot
	// that purerbd cloned: rbd group snap rm trashes it.
	rbdCLI(t, "group", "snap", "create", "rbd/"+name+"@s2")
	snaps = nil
	rbdJSON(t, &snaps, "snap", "ls", "--all", "rbd/"+a)
	if len(snaps) != 1 || snaps[0].Namespace.Type != "group" {
		t.Fatalf("snapshots of %s: %+v", a, snaps)
	}
	if err := CloneFromSnapID(ctx, pool, a, snaps[0].ID, pool, clone, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "group", "snap", "rm", "rbd/"+name+"@s2")
	var after []rbdSnap
	rbdJSON(t, &after, "snap", "ls", "--all", "rbd/"+a)
	if len(after) != 1 || after[0].ID != snaps[0].ID || after[0].Namespace.Type != "trash" {
		t.Fatalf("after librbd's group snap rm, snapshots of %s: %+v (want the member in the trash)", a, after)
	}
	if err := Remove(ctx, pool, clone, RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	after = nil
	rbdJSON(t, &after, "snap", "ls", "--all", "rbd/"+a)
	if len(after) != 0 {
		t.Fatalf("after purerbd removed the clone, snapshots of %s: %+v", a, after)
	}
	rbdCLI(t, "group", "rm", "rbd/"+name)
}
