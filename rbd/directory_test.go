package rbd

import (
	"errors"
	"testing"
)

// TestImageIDAndName looks images up by name and by id, and checks the
// answers against rbd info, across a rename by rbd.
func TestImageIDAndName(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	rbdCLI(t, "create", "--size", "1M", "rbd/"+name)
	want := rbdInfo(t, "rbd/"+name)["id"].(string)
	id, err := ImageID(ctx, testPool(t), name)
	if err != nil || id != want {
		t.Fatalf("ImageID(%q) = %q, %v; rbd info says %q", name, id, err, want)
	}
	if got, err := ImageName(ctx, testPool(t), id); err != nil || got != name {
		t.Errorf("ImageName(%q) = %q, %v; want %q", id, got, err, name)
	}
	renamed := name + "-mv"
	rbdCLI(t, "mv", "rbd/"+name, "rbd/"+renamed)
	if got, err := ImageName(ctx, testPool(t), id); err != nil || got != renamed {
		t.Errorf("ImageName after rbd mv = %q, %v; want %q", got, err, renamed)
	}
	if _, err := ImageID(ctx, testPool(t), name); !errors.Is(err, ErrNotFound) {
		t.Errorf("ImageID of the old name: %v, want ErrNotFound", err)
	}
	if _, err := ImageName(ctx, testPool(t), "0123456789abcd"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ImageName of an unknown id: %v, want ErrNotFound", err)
	}
	if _, err := ImageID(ctx, testPool(t).WithNamespace("no-such-ns"), renamed); !errors.Is(err, ErrNotFound) {
		t.Errorf("ImageID in another namespace: %v, want ErrNotFound", err)
	}
}

// TestNamespaceExists asks for namespaces before and after rbd creates
// and removes them.
func TestNamespaceExists(t *testing.T) {
	ctx := ctxT(t)
	ns := imageName(t)
	exists := func() bool {
		t.Helper()
		ok, err := NamespaceExists(ctx, testPool(t).WithNamespace("any"), ns)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if exists() {
		t.Fatalf("namespace %q exists before rbd namespace create", ns)
	}
	rbdCLI(t, "namespace", "create", "rbd/"+ns)
	if !exists() {
		t.Errorf("namespace %q missing after rbd namespace create", ns)
	}
	rbdCLI(t, "namespace", "remove", "rbd/"+ns)
	if exists() {
		t.Errorf("namespace %q exists after rbd namespace remove", ns)
	}
	if ok, err := NamespaceExists(ctx, testPool(t), ""); !ok || err != nil {
		t.Errorf("the default namespace: %v %v", ok, err)
	}
}
