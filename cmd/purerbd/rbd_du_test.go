package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRBDDuAgainstRbd: purerbd rbd du prints what rbd du prints (plain
// and json, the pool, one image, one snapshot, --exact,
// --merge-snapshots, --from-snap) for images with and without fast-diff
// and a clone, and exits as rbd does when an image or snapshot is
// missing.
func TestRBDDuAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if r := sameAsRbd(t, ctx, c, "du"); r.stdout != "" {
		t.Errorf("du of an empty pool: %q", r.stdout)
	}
	sameAsRbd(t, ctx, c, "du", "--format", "json")
	for image, features := range map[string]string{
		"rbd/plain": "layering",
		"rbd/fd":    "layering,exclusive-lock,object-map,fast-diff",
	} {
		mustRbd(t, ctx, c, "create", "--size", "8M", "--object-size", "1M", "--image-feature", features, image)
		diffHistory(t, ctx, c, image)
	}
	mustRbd(t, ctx, c, "create", "--size", "12636K", "--image-feature", "layering", "rbd/odd-size")
	mustRbd(t, ctx, c, "snap", "protect", "rbd/fd@s1")
	mustRbd(t, ctx, c, "clone", "--image-feature", "layering,exclusive-lock,object-map,fast-diff", "rbd/fd@s1", "rbd/child")
	librbdIO(t, ctx, c, "rbd/child", "write -P 8 6M 4096")

	for _, args := range [][]string{
		{"du"}, {"du", "--format", "json"}, {"du", "--format", "json", "--pretty-format"}, {"du", "--exact"},
		{"du", "--merge-snapshots"},
		{"du", "rbd/plain"}, {"du", "rbd/fd"}, {"du", "--exact", "rbd/plain"}, {"du", "--exact", "rbd/fd"},
		{"du", "rbd/fd@s2"}, {"du", "rbd/plain@s1", "--format", "json"}, {"du", "--from-snap", "s1", "rbd/fd"},
		{"du", "--from-snap", "s1", "rbd/fd@s2"}, {"du", "--merge-snapshots", "rbd/plain"}, {"du", "rbd/child"},
		{"du", "--exact", "rbd/child"}, {"du", "rbd/odd-size"},
	} {
		if r := sameAsRbd(t, ctx, c, args...); r.code != 0 || r.stdout == "" {
			t.Errorf("%s: exit %d, output %q", strings.Join(args, " "), r.code, r.stdout)
		}
	}
	for _, args := range [][]string{
		{"du", "rbd/nosuch"}, {"du", "rbd/fd@nosuch"}, {"du", "--from-snap", "s1"}, {"du", "--from-snap", "nosuch", "rbd/fd"},
		{"du", "--from-snap", "s2", "rbd/fd@s1"},
	} {
		if r := sameAsRbd(t, ctx, c, args...); r.code == 0 {
			t.Errorf("%s: exit 0", strings.Join(args, " "))
		}
	}
}
