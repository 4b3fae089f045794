package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/rados/radostest"
)

// testPurgeCppool copies a pool with objects in two namespaces, one with
// a locator key, xattrs and omap, by either tool into its own pool and
// compares what they print and what they copied; then purges the copies
// the same way; and the refusals: no confirmation, the pool into itself,
// pools that do not exist, a pool with self-managed snapshots.
func testPurgeCppool(t *testing.T, ctx context.Context, c *radostest.Cluster) {
	for _, pool := range []string{"cpsrc", "cpceph", "cppure"} {
		mustCeph(t, ctx, c, "osd", "pool", "create", pool, "8")
	}
	in := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(in, []byte("some data"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := func(args ...string) { t.Helper(); mustRados(t, ctx, c, append([]string{"-p", "cpsrc"}, args...)...) }
	for i := range 20 {
		src("put", "obj"+strings.Repeat("x", i), in)
	}
	src("setxattr", "obj", "user.a", "xattr value")
	src("setomapheader", "obj", "the header")
	src("setomapval", "obj", "k1", "v1")
	src("setomapval", "obj", "k2", "v2")
	src("-N", "ns1", "put", "inns", in)
	src("-N", "ns1", "setomapval", "inns", "k", "v")
	src("--object-locator", "loc", "put", "located", in)

	var want strings.Builder
	r := runCephTool(t, ctx, c, "rados", nil, &want, "cppool", "cpsrc", "cpceph")
	got := pureTool(ctx, c, "rados", nil, "cppool", "cpsrc", "cppure")
	if r.code != 0 || got.code != 0 || got.stdout != strings.ReplaceAll(want.String(), "cpceph", "cppure") {
		t.Errorf("cppool:\n purerbd exit %d:\n%s%s\n rados exit %d:\n%s%s", got.code, got.stdout, got.stderr,
			r.code, want.String(), r.stderr)
	}
	for _, ls := range [][]string{{"ls", "--all"}, {"ls", "--all", "--format", "json"}} {
		theirs := mustRados(t, ctx, c, append([]string{"-p", "cpceph"}, ls...)...)
		ours := mustRados(t, ctx, c, append([]string{"-p", "cppure"}, ls...)...)
		if sortedLines(ours) != sortedLines(theirs) {
			t.Errorf("rados %v of the copies: purerbd's:\n%s\n rados':\n%s", ls, ours, theirs)
		}
	}
	for _, q := range [][]string{{"obj"}, {"-N", "ns1", "inns"}, {"located"}} {
		oid := q[len(q)-1]
		for _, verb := range [][]string{{"get", oid, "-"}, {"listxattr", oid}, {"getomapheader", oid}, {"listomapvals", oid}, {"stat", oid}} {
			args := slices.Concat(q[:len(q)-1], verb)
			theirs := mustRados(t, ctx, c, append([]string{"-p", "cpceph"}, args...)...)
			ours := mustRados(t, ctx, c, append([]string{"-p", "cppure"}, args...)...)
			if verb[0] == "stat" {
				// the modification times differ; the sizes must not
				theirs, ours = theirs[strings.LastIndex(theirs, ","):], ours[strings.LastIndex(ours, ","):]
			}
			if ours != theirs {
				t.Errorf("rados %v of the copies: purerbd's %q, rados' %q", args, ours, theirs)
			}
		}
	}
	sameAsRados(t, ctx, c, "cppool", "cpsrc", "cpsrc")
	sameAsRados(t, ctx, c, "cppool", "nosuchpool", "cpceph")
	sameAsRados(t, ctx, c, "cppool", "cpsrc", "nosuchpool")
	sameExit(t, ctx, c, "cppool", "cpsrc")

	// purge: the refusals, then each tool empties its copy
	sameAsRados(t, ctx, c, "purge", "cpceph")
	sameAsRados(t, ctx, c, "purge", "cpceph", "--yes-i-really-mean-it")
	sameAsRados(t, ctx, c, "purge", "nosuchpool", "--yes-i-really-really-mean-it")
	sameExit(t, ctx, c, "purge")
	want.Reset()
	r = runCephTool(t, ctx, c, "rados", nil, &want, "purge", "cpceph", "--yes-i-really-really-mean-it")
	got = pureTool(ctx, c, "rados", nil, "purge", "cppure", "--yes-i-really-really-mean-it")
	if r.code != 0 || got.code != 0 || got.stdout != strings.ReplaceAll(want.String(), "cpceph", "cppure") {
		t.Errorf("purge:\n purerbd exit %d:\n%s%s\n rados exit %d:\n%s%s", got.code, got.stdout, got.stderr,
			r.code, want.String(), r.stderr)
	}
	for _, pool := range []string{"cpceph", "cppure"} {
		if ls := mustRados(t, ctx, c, "-p", pool, "ls", "--all"); ls != "" {
			t.Errorf("pool %s after purge: %q", pool, ls)
		}
	}
	if ls := mustRados(t, ctx, c, "-p", "cpsrc", "ls", "--all"); strings.Count(ls, "\n") != 22 {
		t.Errorf("the source pool changed: %q", ls)
	}

	// self-managed snapshots (an RBD snapshot) are refused without
	// --yes-i-really-mean-it
	if _, err := c.Rbd(ctx, "create", "--size", "1M", c.Pool+"/img"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rbd(ctx, "snap", "create", c.Pool+"/img@s"); err != nil {
		t.Fatal(err)
	}
	sameAsRados(t, ctx, c, "cppool", c.Pool, "cpceph")
}

// sortedLines returns s's lines sorted, for listings whose order is the
// placement's.
func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
