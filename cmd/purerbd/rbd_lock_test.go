package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRBDLockAgainstRbd compares lock add, ls and rm with Ceph's rbd on
// twin images: exclusive and shared locks, the refusals (held, another
// tag, a missing locker, a malformed one), rbd lock ls of each twin and
// the lock as rados lock info shows it (clients and addresses aside).
func TestRBDLockAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	twins := [2]string{"rbd/ra", "rbd/pa"}
	for _, img := range twins {
		mustRbd(t, ctx, c, "create", "--size", "1M", img)
	}
	step := func(args ...string) {
		t.Helper()
		sameOnTwins(t, ctx, c, withImage(args, twins[0]), withImage(args, twins[1]))
		for _, format := range [][]string{nil, {"--format", "json"}} {
			ls := append([]string{"lock", "ls"}, format...)
			got, want := lockListing(t, ctx, c, append(ls, twins[1])), lockListing(t, ctx, c, append(ls, twins[0]))
			if got != want {
				t.Errorf("after rbd %s: rbd lock ls %s: purerbd's image\n%s\nrbd's\n%s", strings.Join(args, " "), format, got, want)
			}
		}
		// the lock as the OSD keeps it: type, tag, cookies, descriptions
		got, want := headerLock(t, ctx, c, twins[1]), headerLock(t, ctx, c, twins[0])
		if got != want {
			t.Errorf("after rbd %s: rados lock info: purerbd's image\n%s\nrbd's\n%s", strings.Join(args, " "), got, want)
		}
	}
	step("lock", "add", "IMG", "id1")
	step("lock", "add", "IMG", "id1") // held
	step("lock", "add", "--shared", "tg", "IMG", "id2")
	step("lock", "rm", "IMG", "id1", "client.999999")
	step("lock", "rm", "IMG", "id1", "bogus")
	for i, img := range twins {
		var locks []struct {
			Locker string `json:"locker"`
		}
		if err := json.Unmarshal([]byte(mustRbd(t, ctx, c, "lock", "ls", "--format", "json", img)), &locks); err != nil || len(locks) != 1 {
			t.Fatalf("rbd lock ls %s: %v %v", img, locks, err)
		}
		args := []string{"lock", "rm", img, "id1", locks[0].Locker}
		if i == 0 {
			mustRbd(t, ctx, c, args...)
		} else if r := pureRbd(ctx, c, nil, args...); r.code != 0 {
			t.Fatalf("purerbd rbd %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	step("lock", "ls", "IMG")
	step("lock", "add", "--shared", "tg", "IMG", "s1")
	step("lock", "add", "--shared", "tg", "IMG", "s2")
	step("lock", "add", "--shared", "other", "IMG", "s3") // another tag
	step("lock", "add", "IMG", "x")                       // held shared
	step("lock", "add", "rbd/nosuch", "x")
}

var (
	lockerRE  = regexp.MustCompile(`client\.\d+`)
	addressRE = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+/\d+`)
)

// lockListing runs rbd lock ls with args and hides the clients' numbers
// and addresses (so that the columns keep their widths only where the
// tools agree).
func lockListing(t *testing.T, ctx context.Context, c *radostest.Cluster, args []string) string {
	t.Helper()
	out := mustRbd(t, ctx, c, args...)
	out = lockerRE.ReplaceAllString(out, "client.N")
	out = addressRE.ReplaceAllString(out, "ADDR")
	return strings.Join(strings.Fields(out), " ")
}

// headerLock is rados lock info of image's rbd_lock, clients and
// addresses hidden ("" when it was never taken).
func headerLock(t *testing.T, ctx context.Context, c *radostest.Cluster, image string) string {
	t.Helper()
	var info struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(mustRbd(t, ctx, c, "info", "--format", "json", image)), &info); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if r := runCephTool(t, ctx, c, "rados", nil, &out, "-p", "rbd", "lock", "info", "rbd_header."+info.ID, "rbd_lock"); r.code != 0 {
		return ""
	}
	return addressRE.ReplaceAllString(lockerRE.ReplaceAllString(out.String(), "client.N"), "ADDR")
}
