package rbd

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestRenameSnapshot renames snapshots by image id, without opening the
// image, and checks with rbd snap ls; an open image sees the new name.
func TestRenameSnapshot(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	rbdCLI(t, "create", "--size", "1M", spec)
	rbdCLI(t, "snap", "create", spec+"@a")
	rbdCLI(t, "snap", "create", spec+"@b")
	id, err := ImageID(ctx, testPool(t), name)
	if err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{})
	before, err := img.Snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if err := RenameSnapshot(ctx, testPool(t), id, "a", "a2"); err != nil {
		t.Fatal(err)
	}
	var snaps []struct {
		ID   uint64
		Name string
	}
	if err := json.Unmarshal(rbdCLI(t, "snap", "ls", "--format", "json", spec), &snaps); err != nil {
		t.Fatal(err)
	}
	names := map[string]uint64{}
	for _, s := range snaps {
		names[s.Name] = s.ID
	}
	if len(names) != 2 || names["b"] == 0 || names["a2"] == 0 {
		t.Fatalf("rbd snap ls after the rename: %+v", snaps)
	}
	after, err := img.Snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range before {
		if s.Name == "a" && names["a2"] != s.ID {
			t.Errorf("a2 has id %d, a had %d", names["a2"], s.ID)
		}
	}
	if len(after) != 2 || (after[0].Name != "a2" && after[1].Name != "a2") {
		t.Errorf("the open image sees %+v", after)
	}

	if err := RenameSnapshot(ctx, testPool(t), id, "a2", "b"); !errors.Is(err, ErrExists) {
		t.Errorf("renaming onto b: %v, want ErrExists", err)
	}
	if err := RenameSnapshot(ctx, testPool(t), id, "a", "c"); !errors.Is(err, ErrNotFound) {
		t.Errorf("renaming a missing snapshot: %v, want ErrNotFound", err)
	}
	if err := RenameSnapshot(ctx, testPool(t), id, "a2", "x@y"); !errors.Is(err, ErrInvalid) {
		t.Errorf("renaming to x@y: %v, want ErrInvalid", err)
	}
	if err := RenameSnapshot(ctx, testPool(t), "0123456789abcd", "a2", "c"); !errors.Is(err, ErrNotFound) {
		t.Errorf("renaming in a missing image: %v, want ErrNotFound", err)
	}
	// librbd renames back; purerbd sees it
	rbdCLI(t, "snap", "rename", spec+"@a2", spec+"@a")
	if err := RenameSnapshot(ctx, testPool(t), id, "a", "a3"); err != nil {
		t.Errorf("renaming rbd's rename: %v", err)
	}
}
