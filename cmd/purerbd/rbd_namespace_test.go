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

// TestRBDNamespaceAgainstRbd compares namespace create, ls and remove
// with Ceph's rbd: what each leaves in RADOS, librbd's use of a
// namespace purerbd made, and the refusals (exists, missing, in use by
// an image or by the trash).
func TestRBDNamespaceAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mustCeph(t, ctx, c, "osd", "pool", "create", "p2", "8")
	mustRbd(t, ctx, c, "pool", "init", "p2")

	sameAsRbd(t, ctx, c, "namespace", "ls")
	sameAsRbd(t, ctx, c, "namespace", "ls", "--format", "json")
	sameOnTwins(t, ctx, c, []string{"namespace", "create", "rbd/cns"}, []string{"namespace", "create", "rbd/pns"})
	sameOnTwins(t, ctx, c, []string{"--namespace", "cns2", "namespace", "create"}, []string{"--namespace", "pns2", "namespace", "create"})
	if got, want := radosState(t, ctx, c, "pns"), radosState(t, ctx, c, "cns"); got != want {
		t.Errorf("namespace objects: purerbd's %s, rbd's %s", got, want)
	}
	for _, args := range [][]string{
		{"namespace", "ls"}, {"namespace", "list", "rbd", "--format", "json"}, {"namespace", "ls", "--format", "json", "--pretty-format"},
		{"namespace", "ls", "p2"}, {"namespace", "ls", "nopool"},
		{"namespace", "create", "rbd/pns"}, // exists
		{"namespace", "create"}, {"namespace", "create", "rbd/"}, {"namespace", "create", "rbd"},
		{"namespace", "create", "p2/y/z"}, {"namespace", "create", "nopool/y"},
		{"namespace", "rm", "rbd/nosuch"}, {"namespace", "remove"},
	} {
		sameAsRbd(t, ctx, c, args...)
	}
	// librbd uses purerbd's namespace; neither tool removes a namespace
	// with an image, or one in the trash, and images can still be made
	for _, ns := range []string{"pns", "cns"} {
		mustRbd(t, ctx, c, "create", "--size", "1M", "rbd/"+ns+"/img")
	}
	sameOnTwins(t, ctx, c, []string{"namespace", "rm", "rbd/cns"}, []string{"namespace", "rm", "rbd/pns"})
	for _, ns := range []string{"pns", "cns"} {
		mustRbd(t, ctx, c, "create", "--size", "1M", "rbd/"+ns+"/img2")
		mustRbd(t, ctx, c, "rm", "--no-progress", "rbd/"+ns+"/img2")
		mustRbd(t, ctx, c, "trash", "mv", "rbd/"+ns+"/img")
	}
	sameOnTwins(t, ctx, c, []string{"namespace", "rm", "rbd/cns"}, []string{"namespace", "rm", "rbd/pns"})
	for _, ns := range []string{"pns", "cns"} {
		id := strings.Fields(mustRbd(t, ctx, c, "trash", "ls", "rbd/"+ns))[0]
		mustRbd(t, ctx, c, "trash", "rm", "--no-progress", "rbd/"+ns+"/"+id)
	}
	sameOnTwins(t, ctx, c, []string{"namespace", "rm", "rbd/cns"}, []string{"namespace", "remove", "rbd/pns"})
	sameOnTwins(t, ctx, c, []string{"--namespace", "cns2", "namespace", "rm"}, []string{"--namespace", "pns2", "namespace", "rm"})
	if got := radosState(t, ctx, c, "pns"); got != "[]" {
		t.Errorf("purerbd left %s in the removed namespace", got)
	}
	sameAsRbd(t, ctx, c, "namespace", "ls")
}

// TestRBDPoolInitAgainstRbd compares pool init with Ceph's rbd: the
// pool's applications and flags and its rbd_info object, a pool with
// another application (refused unless --force; rbd exits 0 either way),
// one with pool snapshots, and a missing pool.
func TestRBDPoolInitAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, p := range []string{"c1", "p1", "c2", "p2", "c3", "p3"} {
		mustCeph(t, ctx, c, "osd", "pool", "create", p, "8")
	}
	for _, p := range []string{"c2", "p2"} {
		mustCeph(t, ctx, c, "osd", "pool", "application", "enable", p, "rgw")
	}
	for _, p := range []string{"c3", "p3"} {
		mustRados(t, ctx, c, "-p", p, "mksnap", "ps")
	}
	sameOnTwins(t, ctx, c, []string{"pool", "init", "c1"}, []string{"pool", "init", "p1"})
	sameOnTwins(t, ctx, c, []string{"pool", "init", "c1"}, []string{"pool", "init", "p1"}) // again
	sameOnTwins(t, ctx, c, []string{"pool", "init", "c2"}, []string{"pool", "init", "p2"})
	if got, want := poolState(t, ctx, c, "p2"), poolState(t, ctx, c, "c2"); got != want {
		t.Errorf("refused init: purerbd's pool %s, rbd's %s", got, want)
	}
	sameOnTwins(t, ctx, c, []string{"pool", "init", "--force", "c2"}, []string{"pool", "init", "--force", "p2"})
	sameOnTwins(t, ctx, c, []string{"pool", "init", "c3"}, []string{"pool", "init", "p3"})
	sameAsRbd(t, ctx, c, "pool", "init", "nopool")
	for _, p := range []string{"1", "2", "3"} {
		if got, want := poolState(t, ctx, c, "p"+p), poolState(t, ctx, c, "c"+p); got != want {
			t.Errorf("pool init: purerbd's pool %s, rbd's %s", got, want)
		}
	}
	if s := poolState(t, ctx, c, "p1"); !strings.Contains(s, "overwrite validated") || !strings.Contains(s, "rbd") {
		t.Errorf("purerbd's initialized pool: %s", s)
	}
	// librbd takes purerbd's pool
	mustRbd(t, ctx, c, "create", "--size", "1M", "p1/img")
}

// sameOnTwins runs rbdArgs through Ceph's rbd and pureArgs (the same
// command on a twin object) through purerbd, and fails the test unless
// the exit codes and standard outputs agree.
func sameOnTwins(t *testing.T, ctx context.Context, c *radostest.Cluster, rbdArgs, pureArgs []string) {
	t.Helper()
	want := cephRbd(t, ctx, c, nil, rbdArgs...)
	got := pureRbd(ctx, c, nil, pureArgs...)
	if got.code != want.code || got.stdout != want.stdout {
		t.Errorf("purerbd rbd %s: exit %d, stdout:\n%s stderr: %s\nrbd %s: exit %d, stdout:\n%s stderr: %s",
			strings.Join(pureArgs, " "), got.code, got.stdout, got.stderr,
			strings.Join(rbdArgs, " "), want.code, want.stdout, want.stderr)
	}
}

// radosState lists the objects of namespace ns of pool rbd, with their
// omap (names of image objects aside).
func radosState(t *testing.T, ctx context.Context, c *radostest.Cluster, ns string) string {
	t.Helper()
	var objs []string
	for _, o := range strings.Fields(mustRados(t, ctx, c, "-p", "rbd", "-N", ns, "ls")) {
		objs = append(objs, o+":"+mustRados(t, ctx, c, "-p", "rbd", "-N", ns, "listomapvals", o))
	}
	return fmt.Sprint(objs)
}

// poolState is what pool init changes: the pool's applications and
// flags, and its rbd_info object.
func poolState(t *testing.T, ctx context.Context, c *radostest.Cluster, pool string) string {
	t.Helper()
	out, err := c.Ceph(ctx, "osd", "pool", "ls", "detail", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var pools []struct {
		Name  string                     `json:"pool_name"`
		Flags string                     `json:"flags_names"`
		Apps  map[string]json.RawMessage `json:"application_metadata"`
	}
	if err := json.Unmarshal(out, &pools); err != nil {
		t.Fatal(err)
	}
	info := cephRbdRados(t, ctx, c, pool)
	for _, p := range pools {
		if p.Name == pool {
			return fmt.Sprintf("flags %s apps %v rbd_info %q", p.Flags, p.Apps, info)
		}
	}
	t.Fatalf("no pool %s", pool)
	return ""
}

// cephRbdRados reads pool's rbd_info with the rados tool ("" when there
// is none).
func cephRbdRados(t *testing.T, ctx context.Context, c *radostest.Cluster, pool string) string {
	t.Helper()
	var out strings.Builder
	if r := runCephTool(t, ctx, c, "rados", nil, &out, "-p", pool, "get", "rbd_info", "-"); r.code != 0 {
		return ""
	}
	return out.String()
}
