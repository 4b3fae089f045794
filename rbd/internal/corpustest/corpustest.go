// Package corpustest finds the Ceph object corpus (Ceph-written encodings
// of Ceph types) for the rbd packages' tests.
//
// The corpus lives outside the module at ../shared/ceph-object-corpus
// relative to the module root; $PURERBD_CORPUS overrides that. A missing
// corpus skips the calling test only when $CI is unset.
package corpustest

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// Dir returns the corpus root.
func Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("PURERBD_CORPUS")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			t.Fatalf("finding module root: %v", err)
		}
		dir = filepath.Join(root, "..", "shared", "ceph-object-corpus")
	}
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "" && errors.Is(err, os.ErrNotExist) {
			t.Skipf("ceph-object-corpus not found at %s (set PURERBD_CORPUS)", dir)
		}
		t.Fatalf("ceph-object-corpus: %v", err)
	}
	return dir
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Sample is one encoding from the corpus.
type Sample struct {
	Version string // Ceph version that wrote it
	Name    string // file name
	Data    []byte
}

// Samples returns every sample of typ (the corpus folder name, e.g.
// "cls_rbd_snap"), failing the test when there is none.
func Samples(t testing.TB, typ string) []Sample {
	t.Helper()
	root := Dir(t)
	files, err := filepath.Glob(filepath.Join(root, "*", typ, "*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var out []Sample
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Sample{
			Version: filepath.Base(filepath.Dir(filepath.Dir(f))),
			Name:    filepath.Base(f),
			Data:    b,
		})
	}
	if len(out) == 0 {
		t.Fatalf("no samples of %s in %s", typ, root)
	}
	return out
}
