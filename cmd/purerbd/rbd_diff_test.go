package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// diffHistory writes a history into image (8 MiB, 1 MiB objects)
// through librbd (rbd import-diff): data, snapshot s1, overwrites, a discard that removes
// an object and a new object, snapshot s2, then a shrink-in-object
// write pattern and a discard of part of an object.
func diffHistory(t *testing.T, ctx context.Context, c *radostest.Cluster, image string) {
	t.Helper()
	librbdIO(t, ctx, c, image, "write -P 1 0 2M", "write -P 2 3145828 5000", "write -P 3 5743380 10")
	mustRbd(t, ctx, c, "snap", "create", "--no-progress", image+"@s1")
	librbdIO(t, ctx, c, image, "write -P 4 8192 4096", "discard 5M 1M", "write -P 5 7340039 100")
	mustRbd(t, ctx, c, "snap", "create", "--no-progress", image+"@s2")
	librbdIO(t, ctx, c, image, "write -P 6 1M 4096", "discard 1572864 524288", "write -P 7 5M 1000", "discard 0 1M")
}

// TestRBDDiffAgainstRbd: purerbd rbd diff lists the extents rbd diff
// lists, with and without fast-diff (and --whole-object, where fast-diff
// answers from the object maps), from the start and from snapshots, of
// the head and of snapshots, for striped images and a clone too; the
// exit codes of the error cases agree.
func TestRBDDiffAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	striped := []string{"--stripe-unit", "64K", "--stripe-count", "4"}
	images := map[string][]string{
		"rbd/plain":      {"--image-feature", "layering"},
		"rbd/fd":         {"--image-feature", "layering,exclusive-lock,object-map,fast-diff"},
		"rbd/striped":    append([]string{"--image-feature", "layering,striping"}, striped...),
		"rbd/striped-fd": append([]string{"--image-feature", "layering,striping,exclusive-lock,object-map,fast-diff"}, striped...),
	}
	for image, opts := range images {
		mustRbd(t, ctx, c, append(append([]string{"create", "--size", "8M", "--object-size", "1M"}, opts...), image)...)
		diffHistory(t, ctx, c, image)
	}
	// a clone of fd@s1 with writes of its own
	mustRbd(t, ctx, c, "snap", "protect", "rbd/fd@s1")
	mustRbd(t, ctx, c, "clone", "--image-feature", "layering", "rbd/fd@s1", "rbd/child")
	librbdIO(t, ctx, c, "rbd/child", "write -P 8 6M 4096", "write -P 9 0 100")
	mustRbd(t, ctx, c, "snap", "create", "--no-progress", "rbd/child@c1")
	librbdIO(t, ctx, c, "rbd/child", "write -P 10 3M 4096")

	flagSets := [][]string{
		nil, {"--whole-object"}, {"--from-snap", "s1"}, {"--from-snap", "s1", "--whole-object"},
		{"--from-snap", "s2"}, {"--from-snap", "s2", "--whole-object"},
		{"--format", "json"}, {"--from-snap", "s1", "--format", "json", "--pretty-format"},
	}
	for image := range images {
		for _, spec := range []string{image, image + "@s1", image + "@s2"} {
			for _, flags := range flagSets {
				args := append([]string{"diff"}, flags...)
				sameAsRbd(t, ctx, c, append(args, spec)...)
			}
		}
	}
	for _, flags := range [][]string{nil, {"--whole-object"}, {"--from-snap", "c1"}, {"--format", "json"}} {
		sameAsRbd(t, ctx, c, append(append([]string{"diff"}, flags...), "rbd/child")...)
		sameAsRbd(t, ctx, c, append(append([]string{"diff"}, flags...), "rbd/child@c1")...)
	}
	// the oracle must have seen something to compare
	if out := sameAsRbd(t, ctx, c, "diff", "--from-snap", "s1", "rbd/fd"); !strings.Contains(out.stdout, "zero") {
		t.Errorf("diff from s1 shows no removed data:\n%s", out.stdout)
	}
	// errors: a missing snapshot (2), a from-snap newer than the end (22),
	// a missing image (2)
	for _, args := range [][]string{
		{"diff", "--from-snap", "nosuch", "rbd/fd"},
		{"diff", "--from-snap", "s2", "rbd/fd@s1"},
		{"diff", "rbd/nosuch"},
		{"diff"},
	} {
		if r := sameAsRbd(t, ctx, c, args...); r.code == 0 {
			t.Errorf("%s: exit 0", strings.Join(args, " "))
		}
	}
}
