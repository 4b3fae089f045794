package osdmap

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
)

// corpusDir locates shared/ceph-object-corpus: $PURERBD_CORPUS, or
// ../shared/ceph-object-corpus next to the module root. When it is absent
// the test is skipped, unless CI is set.
func corpusDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("PURERBD_CORPUS")
	if dir == "" {
		root := moduleRoot(t)
		dir = filepath.Join(root, "..", "shared", "ceph-object-corpus")
	}
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("encoding corpus not found at %s (set PURERBD_CORPUS): %v", dir, err)
		}
		t.Skipf("encoding corpus not found at %s", dir)
	}
	return dir
}

func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// corpusSamples returns every sample file of a type across all versions,
// sorted.
func corpusSamples(t testing.TB, typ string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(corpusDir(t), "*", typ, "*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatalf("no %s samples in the corpus", typ)
	}
	return files
}

// needTool returns the path of a Ceph tool the test cannot do without.
func needTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is required for this test (apt-get install ceph-common / ceph-base): %v", name, err)
	}
	return p
}
