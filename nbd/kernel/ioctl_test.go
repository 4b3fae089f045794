package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestUseIoctl(t *testing.T) {
	root := t.TempDir()
	cfg := &AttachConfig{Client: ClientConfig{SysfsRoot: root}}
	if useIoctl(cfg, ErrNotLoaded) {
		t.Error("no nbd module and no family: fell back to ioctls instead of reporting the module missing")
	}
	if err := os.MkdirAll(filepath.Join(root, "module", "nbd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !useIoctl(cfg, ErrNotLoaded) {
		t.Error("nbd loaded without a netlink family: no ioctl fallback")
	}
	if useIoctl(cfg, errors.New("netlink: permission denied")) {
		t.Error("fell back to ioctls on an error other than a missing family")
	}
}

func TestFreeIndexes(t *testing.T) {
	s := fakeSysfs(t)
	// nbd0 runs (a pid attribute, as from NBD_DO_IT or CONNECT), nbd1 and
	// nbd12 do not.
	if err := os.WriteFile(s.dev(0, "pid"), []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	free, err := s.freeIndexes()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(free, []int{1, 12}) {
		t.Errorf("free devices %v, want [1 12]", free)
	}
}
