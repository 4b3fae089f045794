package rbd

import (
	"errors"
	"syscall"
	"testing"
)

// TestSnapshotLimit sets and clears an image's snapshot limit; librbd's
// rbd snap create is refused beyond it (EDQUOT) and allowed once it is
// cleared, and a limit below the current count fails with ERANGE.
func TestSnapshotLimit(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	rbdCLI(t, "create", "--size", "1M", "--image-feature", "layering,exclusive-lock", spec)
	rbdCLI(t, "snap", "create", spec+"@a")
	img := openT(t, name, OpenOptions{})
	if got, err := img.SnapshotLimit(ctx); err != nil || got != NoSnapshotLimit {
		t.Fatalf("a new image's limit: %d, %v", got, err)
	}
	if err := img.SetSnapshotLimit(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got, err := img.SnapshotLimit(ctx); err != nil || got != 2 {
		t.Fatalf("limit after setting 2: %d, %v", got, err)
	}
	rbdCLI(t, "snap", "create", spec+"@b")
	if out, err := cluster.Rbd(ctx, "snap", "create", spec+"@c"); err == nil {
		t.Fatalf("rbd snap create beyond the limit succeeded: %s", out)
	}
	if err := img.CreateSnapshot(ctx, "c"); !errors.Is(err, syscall.EDQUOT) {
		t.Errorf("purerbd's snapshot beyond the limit: %v, want EDQUOT", err)
	}
	if err := img.SetSnapshotLimit(ctx, 1); !errors.Is(err, syscall.ERANGE) {
		t.Errorf("a limit below the count: %v, want ERANGE", err)
	}
	if err := img.SetSnapshotLimit(ctx, NoSnapshotLimit); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "snap", "create", spec+"@c")
}
