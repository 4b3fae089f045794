// Package corpus finds Ceph's encoding corpus — binary encodings of Ceph
// types written by Ceph 16.2, 18.2, 19.2 and 20.3 (from the public
// ceph/ceph-object-corpus repository) — for tests that check purerbd's
// decoders against them.
//
// The corpus lives outside the module, at ../shared/ceph-object-corpus
// relative to the module root; $PURERBD_CORPUS overrides that. When it is
// missing the calling test is skipped, unless $CI is set: in CI a missing
// corpus fails the test.
package corpus

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// ModuleRoot returns the directory holding go.mod above the test's
// working directory.
func ModuleRoot(t testing.TB) string {
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
			t.Fatal("corpus: no go.mod above the test's working directory")
		}
		dir = parent
	}
}

// Dir returns the corpus root.
func Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("PURERBD_CORPUS")
	if dir == "" {
		dir = filepath.Join(ModuleRoot(t), "..", "shared", "ceph-object-corpus")
	}
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "" && errors.Is(err, os.ErrNotExist) {
			t.Skipf("ceph-object-corpus not found at %s (set PURERBD_CORPUS)", dir)
		}
		t.Fatalf("ceph-object-corpus: %v", err)
	}
	return dir
}

// Files returns the paths of every sample of typ (the corpus folder name,
// e.g. "OSDMap" or "cls_rbd_snap") across all versions, sorted. It fails
// the test when there is none.
func Files(t testing.TB, typ string) []string {
	t.Helper()
	root := Dir(t)
	files, err := filepath.Glob(filepath.Join(root, "*", typ, "*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatalf("corpus: no samples of %s in %s", typ, root)
	}
	return files
}

// Sample is one encoding from the corpus.
type Sample struct {
	Version string // the Ceph version that wrote it
	Name    string // file name
	Data    []byte
}

// Samples returns every sample of typ, read into memory, sorted by path.
func Samples(t testing.TB, typ string) []Sample {
	t.Helper()
	var out []Sample
	for _, f := range Files(t, typ) {
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
	return out
}

// ByVersion returns the samples of typ grouped by Ceph version.
func ByVersion(t testing.TB, typ string) map[string][][]byte {
	t.Helper()
	out := map[string][][]byte{}
	for _, s := range Samples(t, typ) {
		out[s.Version] = append(out[s.Version], s.Data)
	}
	return out
}
