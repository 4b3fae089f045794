package kernel

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCurrentNetnsProcTrees checks the classification on /proc trees
// shaped as the kernel shows them in each case.
func TestCurrentNetnsProcTrees(t *testing.T) {
	tree := func(files ...string) string {
		root := t.TempDir()
		for _, f := range files {
			p := filepath.Join(root, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("1000\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	for _, c := range []struct {
		name string
		root string
		want Netns
	}{
		{"initial", tree("sys/net/core/netdev_max_backlog", "sys/net/core/somaxconn"), NetnsInitial},
		{"other", tree("sys/net/core/somaxconn"), NetnsOther},
		{"no /proc/sys", tree("self/status"), NetnsUnknown},
	} {
		if got := CurrentNetns(c.root); got != c.want {
			t.Errorf("%s: CurrentNetns = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCurrentNetnsUnshared checks the real /proc: a thread moved into a
// network namespace of its own is told apart from the test's.
func TestCurrentNetnsUnshared(t *testing.T) {
	here := CurrentNetns("")
	if here == NetnsUnknown {
		t.Fatal("CurrentNetns cannot tell the test's network namespace from /proc/sys/net")
	}
	got := make(chan Netns, 1)
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it dies with the goroutine, and
		// its namespace with it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		got <- CurrentNetns("")
	}()
	select {
	case err := <-errc:
		t.Fatalf("unshare(CLONE_NEWNET) (the test needs root): %v", err)
	case n := <-got:
		if n != NetnsOther {
			t.Fatalf("in a new network namespace CurrentNetns = %v, want %v", n, NetnsOther)
		}
	}
	t.Logf("the test runs in the %s network namespace", here)
}

// TestMissingFamilyCause checks that the missing family is blamed on the
// network namespace when that is where the process runs, on the kernel's
// age in the initial namespace, and on either, said as a guess, when the
// namespace is unknown.
func TestMissingFamilyCause(t *testing.T) {
	for _, c := range []struct {
		ns          Netns
		want, avoid []string
	}{
		{NetnsOther, []string{"not visible in this network namespace", "before 6.4", "hostNetwork: true"}, []string{"4.12"}},
		{NetnsInitial, []string{"Linux before 4.12"}, []string{"namespace", "hostNetwork"}},
		{NetnsUnknown, []string{"probably", "initial network namespace", "hostNetwork: true", "4.12"}, nil},
	} {
		msg := MissingFamilyCause(c.ns)
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: %q lacks %q", c.ns, msg, w)
			}
		}
		for _, a := range c.avoid {
			if strings.Contains(msg, a) {
				t.Errorf("%v: %q mentions %q", c.ns, msg, a)
			}
		}
	}
}
