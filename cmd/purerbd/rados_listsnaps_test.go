package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/purerbd/purerbd/rados/radostest"
)

// testListsnaps compares listsnaps, plain, with --pretty-format and in
// JSON, after pool snapshots and writes: clones with overlaps, a head
// alone, clones without a head, a missing object.
func testListsnaps(t *testing.T, ctx context.Context, c *radostest.Cluster) {
	mustCeph(t, ctx, c, "osd", "pool", "create", "lsnaps", "8")
	p := []string{"-p", "lsnaps"}
	theirs := func(args ...string) { t.Helper(); mustRados(t, ctx, c, append(p, args...)...) }
	dir := t.TempDir()
	file := func(name string, size int, b byte) string {
		path := filepath.Join(dir, name)
		data := make([]byte, size)
		for i := range data {
			data[i] = b
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a, b := file("a", 8192, 'a'), file("b", 1024, 'b')

	theirs("put", "o", a)
	theirs("put", "gone", a)
	theirs("mksnap", "s1")
	waitSnaps(t, ctx, c, "lsnaps", 1)
	theirs("put", "o", b, "--offset", "4096") // a clone for s1 sharing all but 4096~1024
	theirs("mksnap", "s2")
	waitSnaps(t, ctx, c, "lsnaps", 2)
	theirs("truncate", "o", "2048")
	theirs("rm", "gone") // clones left, no head
	theirs("put", "fresh", b)
	theirs("mksnap", "s3")
	waitSnaps(t, ctx, c, "lsnaps", 3)
	theirs("append", "fresh", b)
	for _, oid := range []string{"o", "gone", "fresh", "missing"} {
		for _, f := range [][]string{{}, {"--pretty-format"}, {"--format", "json"}, {"-f", "json-pretty"}, {"--format", "json", "--pretty-format"}} {
			sameAsRados(t, ctx, c, append(append(p, "listsnaps", oid), f...)...)
		}
	}
	// o's clones: s1's shares all but the later write with s2's, which
	// shares what the truncation kept with the head
	want := "o:\ncloneid\tsnaps\tsize\toverlap\n1\t1\t8192\t[0~4096,5120~3072]\n2\t2\t8192\t[0~2048]\nhead\t-\t2048\n"
	if r := sameAsRados(t, ctx, c, append(p, "listsnaps", "o")...); r.stdout != want {
		t.Errorf("listsnaps o:\n%s\nwant:\n%s", r.stdout, want)
	}
	sameExit(t, ctx, c, "-p", c.Pool, "listsnaps")
}
