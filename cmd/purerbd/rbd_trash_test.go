package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRBDTrashListAgainstRbd compares trash ls (plain, --long, --all,
// JSON) with Ceph's rbd on a trash holding plain images, one protected
// until a later date, clones (v1, and v2 in a namespace) and
// an image of a namespace; the verbs that move images are refused.
func TestRBDTrashListAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sameAsRbd(t, ctx, c, "trash", "ls")
	sameAsRbd(t, ctx, c, "trash", "ls", "--format", "json")
	for _, args := range [][]string{
		{"namespace", "create", "rbd/ns"},
		{"create", "--size", "1M", "rbd/a"},
		{"create", "--size", "1M", "rbd/b"},
		{"create", "--size", "1M", "rbd/par"},
		{"snap", "create", "rbd/par@s"},
		{"snap", "protect", "rbd/par@s"},
		{"clone", "rbd/par@s", "rbd/kid"},
		{"clone", "--rbd-default-clone-format=2", "rbd/par@s", "rbd/ns/kid2"},
		{"create", "--size", "1M", "rbd/ns/c"},
		{"trash", "mv", "rbd/a"},
		{"trash", "mv", "--expires-at", "2100-01-01", "rbd/b"},
		{"trash", "mv", "rbd/kid"},
		{"trash", "mv", "rbd/ns/kid2"},
		{"trash", "mv", "rbd/ns/c"},
	} {
		mustRbd(t, ctx, c, args...)
	}
	for _, args := range [][]string{
		{"trash", "ls"}, {"trash", "list", "--format", "json"}, {"trash", "ls", "--format", "json", "--pretty-format"},
		{"trash", "ls", "-l"}, {"trash", "ls", "--long", "--format", "json"}, {"trash", "ls", "-a"},
		{"trash", "ls", "rbd/ns"}, {"trash", "ls", "-l", "rbd/ns"}, {"--namespace", "ns", "trash", "ls", "-l", "--format", "json"},
		{"trash", "ls", "nopool"},
	} {
		sameAsRbd(t, ctx, c, args...)
	}
	if out := mustRbd(t, ctx, c, "trash", "ls", "-l", "rbd/ns"); !strings.Contains(out, "rbd/par@s") {
		t.Errorf("rbd trash ls -l shows no parent:\n%s", out)
	}
	for _, args := range [][]string{{"trash", "mv", "rbd/par"}, {"trash", "restore", "x"}, {"trash", "rm", "x"}, {"trash", "purge"}} {
		if r := pureRbd(ctx, c, nil, args...); r.code == 0 || !strings.Contains(r.stderr, "not implemented") {
			t.Errorf("purerbd rbd %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	mustRbd(t, ctx, c, "info", "rbd/par") // not moved
}
