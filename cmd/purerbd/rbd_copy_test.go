package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRBDCopyAgainstRbd compares cp and deep cp with Ceph's rbd: each
// tool copies the same sources (a striped image with object maps and
// metadata, shrunk after two snapshots, and a plain one with zeroed
// blocks inside its data), and the copies must agree in what rbd says
// of them: data at every snapshot, extents written (rbd diff: cp leaves
// out zeroed 4K blocks), layout, features, metadata, snapshots; and in
// the refusals.
func TestRBDCopyAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	mustRbd(t, ctx, c, "create", "--size", "20M", "--object-size", "1M", "--stripe-unit", "64K", "--stripe-count", "4", "rbd/cs")
	mustRbd(t, ctx, c, "image-meta", "set", "rbd/cs", "k1", "v1")
	librbdIO(t, ctx, c, "rbd/cs", "write -P 1 0 5000", "write -P 2 1M 3M", "write -P 3 17M 8K")
	mustRbd(t, ctx, c, "snap", "create", "rbd/cs@s1")
	librbdIO(t, ctx, c, "rbd/cs", "write -P 4 2M 64K", "discard 1M 1M", "write -P 5 19M 1M")
	mustRbd(t, ctx, c, "snap", "create", "rbd/cs@s2")
	mustRbd(t, ctx, c, "snap", "protect", "rbd/cs@s2")
	mustRbd(t, ctx, c, "resize", "--no-progress", "--allow-shrink", "--size", "12M", "rbd/cs")
	librbdIO(t, ctx, c, "rbd/cs", "write -P 6 11M 12K")
	mustRbd(t, ctx, c, "create", "--size", "6M", "--image-feature", "layering", "rbd/ps")
	librbdIO(t, ctx, c, "rbd/ps", "write -P 7 0 64K", "write -P 0 8K 12K", "write -P 8 3M 1M", "write -P 0 3100K 4K")

	for _, tc := range []struct {
		args  []string // with DEST for the copy's name
		snaps []string // the copy's snapshots to compare ("" the head)
	}{
		{[]string{"cp", "rbd/cs", "DEST"}, []string{""}},
		{[]string{"cp", "rbd/cs@s1", "DEST"}, []string{""}},
		{[]string{"cp", "rbd/ps", "DEST"}, []string{""}},
		{[]string{"cp", "--object-size", "8M", "--image-feature", "layering", "rbd/ps", "DEST"}, []string{""}},
		{[]string{"deep", "cp", "rbd/cs", "DEST"}, []string{"@s1", "@s2", ""}},
		{[]string{"deep", "cp", "rbd/cs@s2", "DEST"}, []string{"@s1", "@s2", ""}},
		{[]string{"deep", "cp", "rbd/ps", "DEST"}, []string{""}},
	} {
		name := strings.Join(tc.args[:len(tc.args)-1], " ")
		theirs, ours := "rbd/c"+sanitize(name), "rbd/p"+sanitize(name)
		sameOnTwins(t, ctx, c, append(append([]string(nil), tc.args[:len(tc.args)-1]...), "--no-progress", theirs),
			append(append([]string(nil), tc.args[:len(tc.args)-1]...), "--no-progress", ours))
		for _, s := range tc.snaps {
			if !bytes.Equal(exportOf(t, ctx, c, ours+s), exportOf(t, ctx, c, theirs+s)) {
				t.Errorf("%s: the copies' data differ at %q", name, s)
			}
		}
		for _, args := range [][]string{{"diff"}, {"image-meta", "ls"}, {"snap", "ls", "--format", "json"}} {
			got, want := mustRbd(t, ctx, c, append(args, ours)...), mustRbd(t, ctx, c, append(args, theirs)...)
			if args[0] == "snap" {
				got, want = snapNames(t, ctx, c, ours), snapNames(t, ctx, c, theirs)
			}
			if got != want {
				t.Errorf("%s: rbd %s: purerbd's copy:\n%s\nrbd's:\n%s", name, args[0], got, want)
			}
		}
		if got, want := infoShape(mustRbd(t, ctx, c, "info", ours)), infoShape(mustRbd(t, ctx, c, "info", theirs)); got != want {
			t.Errorf("%s: rbd info: purerbd's copy:\n%s\nrbd's:\n%s", name, got, want)
		}
	}
	for _, args := range [][]string{
		{"cp", "--no-progress", "rbd/cs", "rbd/ccp-rbd-cs"}, // exists
		{"cp", "--no-progress", "rbd/nosuch", "rbd/x"},
		{"cp", "--no-progress", "rbd/cs@nosuch", "rbd/x"},
		{"deep", "cp", "--no-progress", "rbd/nosuch", "rbd/x"},
		{"cp", "rbd/cs"},
		{"cp", "--no-progress", "--object-size", "2M", "rbd/ps", "rbd/x"}, // rbd's stripe unit, 4M
	} {
		sameAsRbd(t, ctx, c, args...)
	}
}

// sanitize makes an image name of a command line.
func sanitize(s string) string {
	return strings.NewReplacer(" ", "-", "/", "-", "@", "-").Replace(s)
}

// exportOf is image's content as rbd export reads it.
func exportOf(t *testing.T, ctx context.Context, c *radostest.Cluster, image string) []byte {
	t.Helper()
	var out bytes.Buffer
	if r := cephRbdTo(t, ctx, c, &out, "export", "--no-progress", image, "-"); r.code != 0 {
		t.Fatalf("rbd export %s: exit %d: %s", image, r.code, r.stderr)
	}
	return out.Bytes()
}

// infoShape is rbd info without what differs between any two images
// (name, id, prefix, times).
func infoShape(info string) string {
	var keep []string
	for _, l := range strings.Split(info, "\n") {
		if strings.HasPrefix(l, "rbd image") || strings.Contains(l, "id: ") || strings.Contains(l, "block_name_prefix") ||
			strings.Contains(l, "_timestamp") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}
