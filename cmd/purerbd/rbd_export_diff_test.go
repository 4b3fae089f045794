package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRBDExportImportDiffAgainstRbd: purerbd export-diff writes the
// stream rbd export-diff writes, byte for byte; a chain of diffs (from
// the start to s1, s1 to s2, s2 to the head) exported by either tool and
// imported by the other rebuilds the image, each snapshot and the head
// reading (rbd export) exactly as the source; a clone's streams hold
// its parent's data as rbd's do; the error cases exit as rbd's do.
func TestRBDExportImportDiffAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	for image, features := range map[string]string{
		"rbd/src":   "layering,exclusive-lock,object-map,fast-diff",
		"rbd/plain": "layering",
	} {
		mustRbd(t, ctx, c, "create", "--size", "8M", "--object-size", "1M", "--image-feature", features, image)
		diffHistory(t, ctx, c, image)
	}
	// a clone, whose diff from its creation holds its parent's data
	mustRbd(t, ctx, c, "snap", "protect", "rbd/plain@s1")
	mustRbd(t, ctx, c, "clone", "--image-feature", "layering", "rbd/plain@s1", "rbd/child")
	librbdIO(t, ctx, c, "rbd/child", "write -P 8 6M 4096", "discard 0 1M")
	mustRbd(t, ctx, c, "snap", "create", "--no-progress", "rbd/child@c1")
	librbdIO(t, ctx, c, "rbd/child", "write -P 9 3M 4096")

	// the same streams
	n := 0
	for _, src := range []string{"rbd/src", "rbd/plain", "rbd/child"} {
		cases := [][]string{
			{src + "@s1"}, {"--from-snap", "s1", src + "@s2"}, {"--from-snap", "s2", src}, {src},
			{"--whole-object", src + "@s1"}, {"--whole-object", "--from-snap", "s1", src},
		}
		if src == "rbd/child" {
			cases = [][]string{{src}, {src + "@c1"}, {"--from-snap", "c1", src}, {"--whole-object", src}}
		}
		for _, args := range cases {
			n++
			mine, theirs := filepath.Join(dir, "mine", "d"), filepath.Join(dir, "theirs", "d")
			mine, theirs = mine+string(rune('a'+n)), theirs+string(rune('a'+n))
			_ = os.MkdirAll(filepath.Dir(mine), 0o755)
			_ = os.MkdirAll(filepath.Dir(theirs), 0o755)
			argv := append(append([]string{"export-diff", "--no-progress"}, args...), theirs)
			if r := cephRbd(t, ctx, c, nil, argv...); r.code != 0 {
				t.Fatalf("rbd %s: %d %s", strings.Join(argv, " "), r.code, r.stderr)
			}
			argv[len(argv)-1] = mine
			if r := pureRbd(ctx, c, nil, argv...); r.code != 0 {
				t.Fatalf("purerbd rbd %s: %d %s", strings.Join(argv, " "), r.code, r.stderr)
			}
			a, _ := os.ReadFile(mine)
			b, _ := os.ReadFile(theirs)
			if !bytes.Equal(a, b) || len(b) < 20 {
				t.Errorf("export-diff %s: purerbd wrote %d bytes, rbd %d, not the same", strings.Join(args, " "), len(a), len(b))
			}
		}
	}

	// chains across tools; the exporter's stream goes to stdout and the
	// importer reads stdin for purerbd
	steps := [][]string{{"rbd/src@s1"}, {"--from-snap", "s1", "rbd/src@s2"}, {"--from-snap", "s2", "rbd/src"}}
	views := []string{"@s1", "@s2", ""}
	exportRbd := func(spec string) []byte {
		var b bytes.Buffer
		r := cephRbdTo(t, ctx, c, &b, "export", "--no-progress", spec, "-")
		if r.code != 0 {
			t.Fatalf("rbd export %s: %s", spec, r.stderr)
		}
		return b.Bytes()
	}
	for _, dir := range []string{"purerbd-to-rbd", "rbd-to-purerbd"} {
		dst := "rbd/" + dir
		mustRbd(t, ctx, c, "create", "--size", "1M", "--object-size", "1M", "--image-feature", "layering", dst)
		for i, step := range steps {
			argv := append(append([]string{"export-diff", "--no-progress"}, step...), "-")
			var stream []byte
			if dir == "purerbd-to-rbd" {
				r := pureRbd(ctx, c, nil, argv...)
				if r.code != 0 {
					t.Fatalf("purerbd export-diff: %s", r.stderr)
				}
				stream = []byte(r.stdout)
				if r := cephRbd(t, ctx, c, bytes.NewReader(stream), "import-diff", "--no-progress", "-", dst); r.code != 0 {
					t.Fatalf("rbd import-diff: %d %s", r.code, r.stderr)
				}
			} else {
				var b bytes.Buffer
				if r := cephRbdTo(t, ctx, c, &b, argv...); r.code != 0 {
					t.Fatalf("rbd export-diff: %s", r.stderr)
				}
				stream = b.Bytes()
				if r := pureRbd(ctx, c, bytes.NewReader(stream), "import-diff", "--no-progress", "-", dst); r.code != 0 {
					t.Fatalf("purerbd import-diff: %d %s", r.code, r.stderr)
				}
			}
			if i < 2 {
				// the end snapshot was created
				if !strings.Contains(mustRbd(t, ctx, c, "snap", "ls", dst), " s"+string(rune('1'+i))+" ") {
					t.Fatalf("%s: no snapshot s%d after import-diff", dst, i+1)
				}
			}
		}
		for _, v := range views {
			if a, b := exportRbd(dst+v), exportRbd("rbd/src"+v); !bytes.Equal(a, b) || len(b) != 8<<20 {
				t.Errorf("%s%s differs from rbd/src%s (%d and %d bytes)", dst, v, v, len(a), len(b))
			}
		}
	}

	// a diff from the start into an image of another size: resized
	mustRbd(t, ctx, c, "create", "--size", "20M", "--image-feature", "layering", "rbd/resized")
	full := pureRbd(ctx, c, nil, "export-diff", "rbd/plain", "-")
	if r := pureRbd(ctx, c, strings.NewReader(full.stdout), "import-diff", "-", "rbd/resized"); r.code != 0 {
		t.Fatalf("import-diff: %s", r.stderr)
	}
	if a, b := exportRbd("rbd/resized"), exportRbd("rbd/plain"); !bytes.Equal(a, b) {
		t.Errorf("rbd/resized differs from rbd/plain (%d and %d bytes)", len(a), len(b))
	}

	// errors, same exit codes: a missing from-snap on export and on
	// import (the diff's start snapshot is not in the image), an end
	// snapshot that exists, a stream that is not one, an existing file
	fromS1 := filepath.Join(dir, "from-s1")
	mustRbd(t, ctx, c, "export-diff", "--no-progress", "--from-snap", "s1", "rbd/src@s2", fromS1)
	s1 := filepath.Join(dir, "s1")
	mustRbd(t, ctx, c, "export-diff", "--no-progress", "rbd/src@s1", s1)
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, []byte("not a diff at all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRbd(t, ctx, c, "create", "--size", "8M", "--image-feature", "layering", "rbd/empty")
	for _, args := range [][]string{
		{"export-diff", "--no-progress", "--from-snap", "nosuch", "rbd/src", filepath.Join(dir, "x")},
		{"export-diff", "--no-progress", "rbd/src", fromS1},
		{"import-diff", "--no-progress", fromS1, "rbd/empty"},
		{"import-diff", "--no-progress", s1, "rbd/purerbd-to-rbd"},
		{"import-diff", "--no-progress", junk, "rbd/empty"},
		{"import-diff", "--no-progress", filepath.Join(dir, "missing"), "rbd/empty"},
		{"import-diff", "--no-progress", s1, "rbd/nosuch"},
	} {
		if r := sameAsRbd(t, ctx, c, args...); r.code == 0 {
			t.Errorf("%s: exit 0", strings.Join(args, " "))
		}
	}
}
