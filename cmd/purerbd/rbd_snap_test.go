package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRBDSnapVerbsAgainstRbd compares snap rename, purge and limit
// set/clear with Ceph's rbd: each command line runs through rbd on one
// image and through purerbd on its twin, which must then agree in exit
// status, standard output and the snapshots rbd lists (the limit seen
// through rbd snap create being refused, or not, on both).
func TestRBDSnapVerbsAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	twins := []string{"rbd/ra", "rbd/pa"}
	both := func(args ...string) {
		t.Helper()
		for _, img := range twins {
			mustRbd(t, ctx, c, withImage(args, img)...)
		}
	}
	step := func(args ...string) {
		t.Helper()
		want := cephRbd(t, ctx, c, nil, withImage(args, twins[0])...)
		got := pureRbd(ctx, c, nil, withImage(args, twins[1])...)
		if got.code != want.code || got.stdout != strings.ReplaceAll(want.stdout, "ra", "pa") {
			t.Errorf("rbd %s:\n purerbd exit %d, stdout:\n%s stderr: %s\n rbd exit %d, stdout:\n%s stderr: %s",
				strings.Join(args, " "), got.code, got.stdout, got.stderr, want.code, want.stdout, want.stderr)
		}
		if a, b := snapNames(t, ctx, c, twins[0]), snapNames(t, ctx, c, twins[1]); a != b {
			t.Errorf("after rbd %s: rbd's image has snapshots %s, purerbd's %s", strings.Join(args, " "), a, b)
		}
	}
	// creating a snapshot with rbd: both refused, or both not
	snapCreate := func(snap string) {
		t.Helper()
		var codes []int
		for _, img := range twins {
			codes = append(codes, cephRbd(t, ctx, c, nil, "snap", "create", img+"@"+snap).code)
		}
		if codes[0] != codes[1] {
			t.Errorf("rbd snap create @%s: exit %d on rbd's image, %d on purerbd's", snap, codes[0], codes[1])
		}
	}
	both("create", "--size", "1M", "IMG")
	for _, s := range []string{"a", "b", "p"} {
		both("snap", "create", "IMG@"+s)
	}
	both("snap", "protect", "IMG@p")

	step("snap", "rename", "IMG@a", "IMG@a2")
	step("snap", "rename", "IMG@a", "IMG@x")    // no such snapshot
	step("snap", "rename", "IMG@a2", "IMG@b")   // exists
	step("snap", "rename", "IMG@b", "rbd/zz@c") // another image
	step("snap", "rename", "IMG@b")             // no destination
	step("snap", "rename", "IMG@b", "c")        // no destination snapshot
	step("snap", "rename", "rbd/nosuch@b", "rbd/nosuch@c")

	step("snap", "limit", "set", "IMG")                 // no --limit
	step("snap", "limit", "set", "--limit", "2", "IMG") // below the count
	step("snap", "limit", "set", "--limit", "4", "IMG")
	snapCreate("d")
	snapCreate("e") // refused
	step("snap", "limit", "clear", "IMG")
	snapCreate("e")
	step("snap", "limit", "set", "--limit", "9", "rbd/nosuch")

	step("snap", "purge", "--no-progress", "IMG") // leaves p, says so
	both("snap", "create", "IMG@q")
	both("snap", "protect", "IMG@q")
	both("snap", "create", "IMG@r")
	step("snap", "purge", "IMG") // two protected
	both("snap", "unprotect", "IMG@p")
	both("snap", "unprotect", "IMG@q")
	step("snap", "purge", "IMG")
	step("snap", "purge", "IMG") // nothing left
	step("snap", "purge", "rbd/nosuch")
	step("snap", "purge", "IMG@p")
}

// withImage replaces IMG in args with image.
func withImage(args []string, image string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, "IMG", image)
	}
	return out
}

// snapNames is what rbd snap ls says of image's snapshots: names and
// protection, oldest first.
func snapNames(t *testing.T, ctx context.Context, c *radostest.Cluster, image string) string {
	t.Helper()
	var snaps []struct {
		Name      string `json:"name"`
		Protected string `json:"protected"`
	}
	if err := json.Unmarshal([]byte(mustRbd(t, ctx, c, "snap", "ls", "--format", "json", image)), &snaps); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(snaps)
}
