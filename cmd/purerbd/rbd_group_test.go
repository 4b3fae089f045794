package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRBDGroupAgainstRbd runs the group verbs through Ceph's rbd on one
// set of groups and images (c...) and through purerbd on a twin set
// (p...), comparing exit codes and standard output: creation, members
// across pools and namespaces, group snapshots, renames, rollback, the
// refusals (existing, missing, an image in another group, mismatched
// namespaces, malformed specs) and removal; then each tool lists, in
// plain text and JSON, what the other made.
func TestRBDGroupAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mustCeph(t, ctx, c, "osd", "pool", "create", "p2", "8")
	mustRbd(t, ctx, c, "pool", "init", "p2")
	mustRbd(t, ctx, c, "namespace", "create", "rbd/ns1")
	for _, x := range []string{"c", "p"} {
		for _, img := range []string{"rbd/" + x + "img1", "rbd/" + x + "img2", "p2/" + x + "img3", "rbd/ns1/" + x + "img4", "rbd/" + x + "rmx"} {
			mustRbd(t, ctx, c, "create", "--size", "4M", img)
		}
	}
	// twin runs a command line whose @@ stands for c with rbd and for p
	// with purerbd
	twin := func(args ...string) {
		t.Helper()
		sub := func(x string) []string {
			out := make([]string, len(args))
			for i, a := range args {
				out[i] = strings.ReplaceAll(a, "@@", x)
			}
			return out
		}
		sameOnTwins(t, ctx, c, sub("c"), sub("p"))
	}
	// both lists the groups, images and snapshots of both sets with each
	// tool
	both := func(args ...string) {
		t.Helper()
		for _, x := range []string{"c", "p"} {
			a := make([]string, len(args))
			for i, s := range args {
				a[i] = strings.ReplaceAll(s, "@@", x)
			}
			sameAsRbd(t, ctx, c, a...)
		}
	}

	sameAsRbd(t, ctx, c, "group", "ls")
	sameAsRbd(t, ctx, c, "group", "ls", "--format", "json")
	for _, args := range [][]string{
		{"group", "create", "@@g"}, {"group", "create", "@@g"}, {"group", "create"}, {"group", "create", "rbd/"},
		{"group", "create", "nopool/@@g"}, {"group", "create", "rbd/nons/@@g"}, {"group", "create", "--group", "@@g2"},
		{"group", "create", "--pool", "rbd", "@@g3"}, {"group", "create", "@@g9", "extra"}, {"group", "create", "a@b"},
		{"group", "create", "rbd/ns1/@@gn"},
		{"group", "image", "add", "@@g", "@@img1"}, {"group", "image", "add", "rbd/@@g", "rbd/@@img2"},
		{"group", "image", "add", "@@g", "p2/@@img3"}, {"group", "image", "add", "@@g", "@@img1"},
		{"group", "image", "add", "@@g2", "@@img1"}, {"group", "image", "add", "@@g", "nosuchimg"},
		{"group", "image", "add", "nosuchg", "@@img1"}, {"group", "image", "add", "@@g"},
		{"group", "image", "add", "rbd/ns1/@@gn", "@@img2"}, {"group", "image", "add", "rbd/ns1/@@gn", "rbd/ns1/@@img4"},
		{"group", "image", "add", "--group-pool", "rbd", "--group", "@@g2", "--image-pool", "rbd", "--image", "@@rmx"},
		{"group", "snap", "create", "@@g@s1"}, {"group", "snap", "create", "@@g@s1"}, {"group", "snap", "create", "@@g"},
		{"group", "snap", "create", "@@g@"}, {"group", "snap", "create", "nosuch@s"},
		{"group", "snap", "create", "--group", "@@g", "--snap", "s2"},
		{"group", "snap", "create", "rbd/@@g", "--snap", "s3", "--skip-quiesce"}, {"group", "snap", "create", "@@g@bad/name"},
		{"group", "snap", "create", "rbd/ns1/@@gn@x"}, {"group", "snap", "create", "@@g3@empty"},
		{"group", "snap", "rename", "@@g@s2", "s2b"}, {"group", "snap", "rename", "@@g@s2b", "s3"},
		{"group", "snap", "rename", "@@g@nosuch", "x"}, {"group", "snap", "rename", "@@g@s3", "s3"},
		{"group", "snap", "rename", "nosuch@a", "b"}, {"group", "snap", "rename", "@@g@s3", "--dest-snap", "s3b"},
		{"group", "snap", "rename", "@@g@s3b", "bad@x"}, {"group", "snap", "rename", "@@g@s3b"},
		{"group", "snap", "rm", "@@g@nosuch"}, {"group", "snap", "rm", "nosuch@s"}, {"group", "snap", "rm", "@@g@s3b"},
		{"group", "snap", "rollback", "--no-progress", "@@g@s1"}, {"group", "snap", "rollback", "@@g@nosuch"},
		{"group", "snap", "rollback", "@@g"},
		{"group", "rename", "@@g3", "@@g4"}, {"group", "rename", "@@g4", "@@g"}, {"group", "rename", "nosuch", "x"},
		{"group", "rename", "@@g4", "rbd/@@g5"}, {"group", "rename", "@@g4", "--dest-group", "@@g5"},
		{"group", "rename", "--namespace", "ns1", "@@gn", "@@gm"},
		{"rm", "@@rmx"}, // a member
	} {
		twin(args...)
	}
	for _, args := range [][]string{
		{"group", "ls"}, {"group", "ls", "--format", "json", "--pretty-format"}, {"group", "list", "rbd/ns1"},
		{"group", "ls", "--namespace", "ns1", "--format", "json"}, {"group", "ls", "nopool"}, {"group", "ls", "rbd/nons"},
		{"group", "image", "ls", "nosuch"}, {"group", "image", "ls", "nosuch", "--format", "json"}, {"group", "image", "ls"},
		{"group", "snap", "ls", "nosuch"}, {"group", "snap", "ls", "nosuch", "--format", "json"}, {"group", "snap", "ls"},
	} {
		sameAsRbd(t, ctx, c, args...)
	}
	for _, args := range [][]string{
		{"group", "image", "ls", "@@g"}, {"group", "image", "list", "@@g", "--format", "json"},
		{"group", "image", "ls", "rbd/ns1/@@gn", "--format", "json", "--pretty-format"}, {"group", "image", "ls", "rbd/ns1/@@gn"},
		{"group", "image", "ls", "@@g@s1"}, {"group", "image", "ls", "@@g2"},
		{"group", "snap", "ls", "@@g"}, {"group", "snap", "list", "@@g", "--format", "json"},
		{"group", "snap", "ls", "@@g5", "--format", "json", "--pretty-format"}, {"group", "snap", "ls", "rbd/ns1/@@gn"},
		{"group", "snap", "ls", "@@g2"},
		{"snap", "ls", "--all", "@@img1"}, {"snap", "ls", "--all", "--format", "json", "@@img1"}, {"snap", "ls", "@@img1"},
		{"snap", "ls", "--all", "--format", "json", "rbd/ns1/@@img4"},
	} {
		both(args...)
	}
	// member snapshots are in the group namespace, named alike
	for _, x := range []string{"c", "p"} {
		out := mustRbd(t, ctx, c, "snap", "ls", "--all", "--format", "json", "rbd/"+x+"img1")
		if strings.Count(out, `"type":"group"`) != 2 || !strings.Contains(out, `"group":"`+x+`g","group snap":"s1"`) ||
			!strings.Contains(out, `"name":".group.1_`) {
			t.Errorf("rbd snap ls --all of a member of %sg: %s", x, out)
		}
	}
	// rbd info names a member's group
	for _, x := range []string{"c", "p"} {
		for _, img := range []string{"rbd/" + x + "img1", "rbd/ns1/" + x + "img4"} {
			want := cephRbd(t, ctx, c, nil, "info", img)
			got := pureRbd(ctx, c, nil, "info", img)
			line := func(out string) string {
				for _, l := range strings.Split(out, "\n") {
					if strings.HasPrefix(l, "\tgroup: ") {
						return l
					}
				}
				return ""
			}
			if line(got.stdout) == "" || line(got.stdout) != line(want.stdout) {
				t.Errorf("info %s: purerbd's group line %q, rbd's %q", img, line(got.stdout), line(want.stdout))
			}
		}
	}
	for _, args := range [][]string{
		{"group", "image", "rm", "@@g2", "@@img2"}, {"group", "image", "rm", "@@g2", "nosuchimg"},
		{"group", "image", "remove", "nosuchg", "@@img2"}, {"group", "image", "rm", "@@g", "rbd/@@img2"},
		{"group", "image", "rm", "@@g", "@@img2"}, {"group", "image", "rm", "rbd/ns1/@@gn", "@@img1"},
		{"group", "rm", "@@g"}, {"group", "remove", "nosuch"}, {"group", "rm", "rbd/ns1/@@gn"}, {"group", "rm", "--group", "@@g2"},
		{"rm", "@@rmx"}, {"snap", "ls", "--all", "--format", "json", "@@img1"},
	} {
		twin(args...)
	}
	sameAsRbd(t, ctx, c, "group", "ls")

	// each tool removes what the other made
	mustRbd(t, ctx, c, "group", "create", "rbd/cx")
	mustRbd(t, ctx, c, "group", "image", "add", "rbd/cx", "rbd/cimg1")
	mustRbd(t, ctx, c, "group", "snap", "create", "rbd/cx@s")
	mustPure(t, ctx, c, "group", "create", "rbd/px")
	mustPure(t, ctx, c, "group", "image", "add", "rbd/px", "rbd/pimg1")
	mustPure(t, ctx, c, "group", "snap", "create", "rbd/px@s")
	mustPure(t, ctx, c, "group", "snap", "rm", "rbd/cx@s")
	mustRbd(t, ctx, c, "group", "snap", "rm", "rbd/px@s")
	both("snap", "ls", "--all", "--format", "json", "rbd/@@img1")
	mustPure(t, ctx, c, "group", "rm", "rbd/cx")
	mustRbd(t, ctx, c, "group", "rm", "rbd/px")
	sameAsRbd(t, ctx, c, "group", "ls", "--format", "json")
	twin("rm", "@@img1")
}

// mustPure runs purerbd rbd and fails the test if it fails.
func mustPure(t *testing.T, ctx context.Context, c *radostest.Cluster, args ...string) string {
	t.Helper()
	r := pureRbd(ctx, c, nil, args...)
	if r.code != 0 {
		t.Fatalf("purerbd rbd %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}
