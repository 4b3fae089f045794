package kernel

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

func TestList(t *testing.T) {
	s := fakeSysfs(t)
	root := string(s)
	// no module: no devices, whatever sysfs holds
	if l, err := List(root); err != nil || l != nil {
		t.Fatalf("without nbd loaded: %v %v", l, err)
	}
	if err := os.MkdirAll(filepath.Join(root, "module", "nbd"), 0o755); err != nil {
		t.Fatal(err)
	}
	// nbd12 and nbd0 run, nbd1 does not; nbd2 runs with no backend
	// file (an ioctl device) and lists after nbd0, before nbd12
	for _, i := range []int{12, 0, 2} {
		if err := os.MkdirAll(s.dev(i, "mq/0"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.dev(i, "pid"), []byte(strconv.Itoa(4200+i)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(s.dev(2, "size"), []byte("2048\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := List(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapped{
		{Index: 0, Size: 131072 * 512, Connections: 2, Cookie: "pvc-a", PID: 4200},
		{Index: 2, Size: 2048 * 512, Connections: 1, PID: 4202},
		{Index: 12, Size: 8 * 512, Connections: 1, Cookie: "pvc-b", PID: 4212},
	}
	if !reflect.DeepEqual(l, want) {
		t.Errorf("List = %+v\nwant %+v", l, want)
	}
	if p := l[2].Path(); p != "/dev/nbd12" {
		t.Errorf("path %q", p)
	}
	// a running device whose size cannot be read is an error, not a
	// silent omission
	if err := os.WriteFile(s.dev(2, "size"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := List(root); err == nil {
		t.Error("bad size attribute: no error")
	}
}
