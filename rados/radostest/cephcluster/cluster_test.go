package cephcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/internal/shorttier"
	"github.com/purerbd/purerbd/internal/testcache"
)

// TestMissingBinaries: without Ceph on PATH the error names the fix.
func TestMissingBinaries(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start(context.Background(), Options{Release: ReleaseHost})
	if err == nil || !strings.Contains(err.Error(), "make deps") || !strings.Contains(err.Error(), "ceph-mon") {
		t.Fatalf("Start without binaries: %v", err)
	}
}

func TestNewKeyShape(t *testing.T) {
	k, err := newKey(keyTypeAES)
	if err != nil || len(k) != 40 || !strings.HasPrefix(k, "AQ") {
		t.Fatalf("newKey(aes) = %q, %v", k, err)
	}
	// aes256k keys look like Tentacle's own: "Ag..." and 44 bytes
	k, err = newKey(keyTypeAES256K)
	if err != nil || len(k) != 60 || !strings.HasPrefix(k, "Ag") {
		t.Fatalf("newKey(aes256k) = %q, %v", k, err)
	}
}

func TestLeasePortsDistinct(t *testing.T) {
	a, err := leasePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	defer a.release()
	b, err := leasePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	defer b.release()
	seen := map[int]bool{}
	for _, p := range append(append([]int{}, a.ports...), b.ports...) {
		if seen[p] {
			t.Fatalf("port %d leased twice", p)
		}
		seen[p] = true
	}
}

// A root that cannot be built fails the boot, naming what went wrong:
// tests against another release never skip for want of it.
func TestRootUnbuildable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(CacheEnv, file) // roots/sid cannot be made under a file
	_, err := Start(context.Background(), Options{Release: ReleaseTentacle})
	if err == nil || !strings.Contains(err.Error(), "building the sid root") {
		t.Fatalf("Start with an unbuildable root: %v", err)
	}
	if _, err := Start(context.Background(), Options{Release: "quincy"}); err == nil || !strings.Contains(err.Error(), "unknown Ceph release") {
		t.Fatalf("Start with an unknown release: %v", err)
	}
}

func TestRootReadyNeedsTodaysPackages(t *testing.T) {
	pkgs := rootPackages()
	if !strings.Contains(pkgs, "ceph-mon") || !strings.Contains(pkgs, "ceph-mgr") {
		t.Fatalf("package list %q read from build-root.sh", pkgs)
	}
	root := t.TempDir()
	if rootReady(root) {
		t.Fatal("a root without a stamp is ready")
	}
	stamp := filepath.Join(root, rootStamp)
	// a root stamped by an older script (no package list, or another one)
	for _, old := range []string{"ceph version 20.2.4; built in 320s\n", "ceph version 20.2.4; built in 320s\npackages: ceph-mon ceph-osd ceph-common\n"} {
		if err := os.WriteFile(stamp, []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
		if rootReady(root) {
			t.Fatalf("stamp %q counts as ready", old)
		}
	}
	if err := os.WriteFile(stamp, []byte("ceph version 20.2.4; built in 320s\npackages: "+pkgs+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !rootReady(root) {
		t.Fatal("a root stamped with today's package list is not ready")
	}
}

// TestBuildRootExtrasRecordedApart runs build-root.sh on a finished root
// (a stamp alone): without extras, and with extras its extras file
// already names, it is a no-op that leaves the stamp as it was, so that
// the bench's extra packages never change what the tests check.
func TestBuildRootExtrasRecordedApart(t *testing.T) {
	shorttier.Skip(t, "bash and build-root.sh")
	cache := t.TempDir()
	t.Setenv(CacheEnv, cache)
	root := filepath.Join(cache, "roots", "sid")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	stamp := "ceph version 20.2.4; built in 320s\npackages: " + rootPackages() + "\n"
	if err := os.WriteFile(filepath.Join(root, rootStamp), []byte(stamp), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".purerbd-root-extras"), []byte("fio\nqemu-utils\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, args := range [][]string{{"sid"}, {"sid", "fio"}, {"sid", "qemu-utils", "fio"}} {
		if err := testcache.RunScript(ctx, buildRootScript, args...); err != nil {
			t.Errorf("build-root.sh %v: %v", args, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, rootStamp)); err != nil || string(b) != stamp || !rootReady(root) {
		t.Errorf("stamp now %q, %v", b, err)
	}
	if r, err := EnsureRootExtras(ctx, ReleaseTentacle, "fio"); err != nil || r != root {
		t.Errorf("EnsureRootExtras = %q, %v; want %q", r, err, root)
	}
	if r, err := EnsureRootExtras(ctx, ReleaseHost, "fio"); err != nil || r != "" {
		t.Errorf("EnsureRootExtras on the host = %q, %v; want nothing", r, err)
	}
}

// TestDirInUse: a directory an earlier cluster left behind is refused at
// once (its monitor store would not take the new keys, and the boot
// would wait out its timeout); an empty or absent one is taken.
func TestDirInUse(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ceph.conf"), []byte("[global]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{Dir: dir, Release: ReleaseHost})
	if !errors.Is(err, ErrDirInUse) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Start in a used directory: %v, want ErrDirInUse naming %s", err, dir)
	}
	for _, d := range []string{"", t.TempDir(), filepath.Join(t.TempDir(), "new")} {
		if err := checkDirFresh(d); err != nil {
			t.Errorf("checkDirFresh(%q) = %v, want nil", d, err)
		}
	}
}
