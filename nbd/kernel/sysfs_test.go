package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A sysfs tree laid out as Linux 6.1 shows nbd devices (the VM test reads
// the real one).
func fakeSysfs(t *testing.T) sysfs {
	t.Helper()
	root := t.TempDir()
	write := func(p, s string) {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("block/nbd0/size", "131072\n")
	write("block/nbd0/backend", "pvc-a\n")
	write("block/nbd0/mq/0/cpu_list", "0\n")
	write("block/nbd0/mq/1/cpu_list", "1\n")
	write("block/nbd1/size", "0\n")
	write("block/nbd12/size", "8\n")
	write("block/nbd12/backend", "pvc-b\n")
	write("block/sda/size", "100\n")
	write("block/nbdx/size", "1\n")
	return sysfs(root)
}

func TestSysfs(t *testing.T) {
	s := fakeSysfs(t)
	if i, err := s.findByCookie("pvc-b"); err != nil || i != 12 {
		t.Errorf("pvc-b: %d %v", i, err)
	}
	if _, err := s.findByCookie("pvc-c"); !errors.Is(err, ErrNoSuchDevice) {
		t.Errorf("unknown cookie: %v", err)
	}
	if _, err := s.findByCookie(""); err == nil {
		t.Error("empty cookie searched for")
	}
	if c, err := s.backend(1); err != nil || c != "" {
		t.Errorf("device without cookie: %q %v", c, err)
	}
	if _, err := s.backend(7); err == nil {
		t.Error("missing device has a cookie")
	}
	if n, err := s.size(0); err != nil || n != 64<<20 {
		t.Errorf("size %d %v", n, err)
	}
	if n, err := s.queues(0); err != nil || n != 2 {
		t.Errorf("queues %d %v", n, err)
	}
	if l, err := s.devices(); err != nil || len(l) != 3 {
		t.Errorf("devices %v %v", l, err)
	}
	os.WriteFile(filepath.Join(string(s), "block/nbd1/size"), []byte("-5\n"), 0o644)
	if _, err := s.size(1); err == nil {
		t.Error("negative size accepted")
	}
}
