package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/cephconf"
	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRadosPoolVerbsAgainstRadosCLI compares lspools, df, lssnap, mksnap
// and rmsnap with the rados tool's on one cluster: exit codes and
// standard output.
func TestRadosPoolVerbsAgainstRadosCLI(t *testing.T) {
	// df's figures come from the manager
	c := radostest.New(t, radostest.Options{WithMgr: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mustCeph(t, ctx, c, "osd", "pool", "create", "snappool", "8")
	mustRados(t, ctx, c, "-p", "snappool", "put", "o", "/etc/hostname")
	mustRados(t, ctx, c, "-p", c.Pool, "setomapval", "o", "key", "a value of some length")

	// wait for the manager's first report of every pool
	for !strings.Contains(mustRados(t, ctx, c, "df"), "snappool") {
		if ctx.Err() != nil {
			t.Fatal("the manager never reported pool snappool")
		}
		time.Sleep(time.Second)
	}
	sameAsRados(t, ctx, c, "lspools")
	sameAsRados(t, ctx, c, "lspools", "--format", "json") // the rados tool prints plain text
	// The manager reports usage every few seconds: a report landing
	// between the two tools' runs changes the figures, so df is compared
	// until a run of both sees the same report.
	for _, args := range [][]string{
		{"df"}, {"df", "--format", "json"}, {"df", "-f", "json-pretty"}, {"-p", "snappool", "df"}, {"-p", "snappool", "df", "--format", "json"},
	} {
		sameEventually(t, ctx, c, args...)
	}
	sameAsRados(t, ctx, c, "-p", "nosuchpool", "df")

	p := []string{"-p", "snappool"}
	if r := pureTool(ctx, c, "rados", nil, append(p, "mksnap", "s1")...); r.code != 0 || r.stdout != "created pool snappool snap s1\n" {
		t.Fatalf("mksnap: %+v", r)
	}
	mustRados(t, ctx, c, append(p, "mksnap", "s2")...)
	waitSnaps(t, ctx, c, "snappool", 2)
	sameAsRados(t, ctx, c, append(p, "lssnap")...)
	sameAsRados(t, ctx, c, append(p, "mksnap", "s1")...)   // exists
	sameAsRados(t, ctx, c, append(p, "rmsnap", "nope")...) // missing
	if r := pureTool(ctx, c, "rados", nil, append(p, "rmsnap", "s1")...); r.code != 0 || r.stdout != "removed pool snappool snap s1\n" {
		t.Fatalf("rmsnap: %+v", r)
	}
	waitSnaps(t, ctx, c, "snappool", 1)
	sameAsRados(t, ctx, c, append(p, "lssnap")...)
	// rollback to s2, taken before this write
	before := mustRados(t, ctx, c, append(p, "get", "o", "-")...)
	mustRados(t, ctx, c, append(p, "setomapheader", "o", "after s2")...)
	mustRados(t, ctx, c, append(p, "truncate", "o", "1")...)
	if r := pureTool(ctx, c, "rados", nil, append(p, "rollback", "o", "s2")...); r.code != 0 || r.stdout != "rolled back pool snappool to snapshot s2\n" {
		t.Fatalf("rollback: %+v", r)
	}
	if got := mustRados(t, ctx, c, append(p, "get", "o", "-")...); got != before {
		t.Errorf("after rollback: %q, want %q", got, before)
	}
	sameAsRados(t, ctx, c, append(p, "getomapheader", "o")...)
	sameAsRados(t, ctx, c, append(p, "rollback", "o", "nosnap")...)
	sameAsRados(t, ctx, c, "-p", c.Pool, "lssnap")
	// an RBD snapshot puts the pool in self-managed mode: no pool snapshots
	if _, err := c.Rbd(ctx, "create", "--size", "1M", c.Pool+"/img"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rbd(ctx, "snap", "create", c.Pool+"/img@s"); err != nil {
		t.Fatal(err)
	}
	sameAsRados(t, ctx, c, "-p", c.Pool, "mksnap", "x")
}

// sameEventually is sameAsRados for output that may change between two
// runs: it retries a few times before it reports a difference.
func sameEventually(t *testing.T, ctx context.Context, c *radostest.Cluster, args ...string) {
	t.Helper()
	for try := 0; ; try++ {
		var out strings.Builder
		want := runCephTool(t, ctx, c, "rados", nil, &out, args...)
		got := pureTool(ctx, c, "rados", nil, args...)
		if got.code == want.code && got.stdout == out.String() {
			return
		}
		if try == 5 {
			t.Errorf("rados %s:\n purerbd exit %d, stdout:\n%s stderr: %s\n rados exit %d, stdout:\n%s stderr: %s",
				strings.Join(args, " "), got.code, got.stdout, got.stderr, want.code, out.String(), want.stderr)
			return
		}
		time.Sleep(2 * time.Second)
	}
}

// sameExit runs args through both tools and fails the test unless the
// exit codes agree, for command lines the rados tool answers with its
// usage, which it prints partly on standard output.
func sameExit(t *testing.T, ctx context.Context, c *radostest.Cluster, args ...string) {
	t.Helper()
	var out strings.Builder
	want := runCephTool(t, ctx, c, "rados", nil, &out, args...)
	if got := pureTool(ctx, c, "rados", nil, args...); got.code != want.code {
		t.Errorf("rados %s: purerbd exit %d (%s), rados exit %d", strings.Join(args, " "), got.code, got.stderr, want.code)
	}
}

// waitSnaps waits until the rados tool lists n snapshots of pool, so
// that both tools' OSD maps have them.
func waitSnaps(t *testing.T, ctx context.Context, c *radostest.Cluster, pool string, n int) {
	t.Helper()
	want := strconv.Itoa(n) + " snaps\n"
	for !strings.HasSuffix(mustRados(t, ctx, c, "-p", pool, "lssnap"), want) {
		if ctx.Err() != nil {
			t.Fatalf("pool %s never had %d snapshots", pool, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRadosObjectVerbsAgainstRadosCLI compares append, cp, touch,
// listwatchers, the omap header verbs and ls --format json with the
// rados tool's, each writing what the other reads.
func TestRadosObjectVerbsAgainstRadosCLI(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	p := []string{"-p", c.Pool}
	ours := func(stdin string, args ...string) {
		t.Helper()
		if r := pureTool(ctx, c, "rados", strings.NewReader(stdin), append(p, args...)...); r.code != 0 {
			t.Fatalf("purerbd rados %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	theirs := func(args ...string) string { t.Helper(); return mustRados(t, ctx, c, append(p, args...)...) }
	same := func(args ...string) cmdResult { t.Helper(); return sameAsRados(t, ctx, c, append(p, args...)...) }
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, []byte(" and a file"), 0o600); err != nil {
		t.Fatal(err)
	}

	// append: ours from stdin and a file, theirs on top; an empty append
	// creates the object
	ours("stdin", "append", "a", "-")
	ours("", "append", "a", in)
	theirs("append", "a", in)
	if got := theirs("get", "a", "-"); got != "stdin and a file and a file" {
		t.Errorf("after appends: %q", got)
	}
	ours("", "append", "empty", "-")
	same("stat", "empty")
	// The rados tool says it cannot read the file and exits 0; purerbd
	// fails.
	if r := pureTool(ctx, c, "rados", nil, append(p, "append", "a", filepath.Join(dir, "missing"))...); r.code != 1 {
		t.Errorf("append of a missing file: %+v", r)
	}

	// cp: data, xattrs, omap header and values; within the pool and into
	// another one
	theirs("put", "src", in)
	theirs("setxattr", "src", "user.x", "xv")
	theirs("setomapheader", "src", "the header")
	theirs("setomapval", "src", "k1", "v1")
	theirs("setomapval", "src", "k2", "v2")
	ours("", "cp", "src", "dst")
	mustCeph(t, ctx, c, "osd", "pool", "create", "other", "8")
	ours("", "cp", "src", "--target-pool", "other")
	for _, q := range [][]string{{"-p", c.Pool, "dst"}, {"-p", "other", "src"}} {
		for _, verb := range [][]string{{"get", q[2], "-"}, {"listxattr", q[2]}, {"getxattr", q[2], "user.x"}, {"getomapheader", q[2]}, {"listomapvals", q[2]}} {
			want := theirs(append([]string{verb[0], "src"}, verb[2:]...)...)
			if got := mustRados(t, ctx, c, slices.Concat(q[:2], verb)...); got != want {
				t.Errorf("rados %s of the copy %v: %q, the original: %q", verb[0], q, got, want)
			}
		}
	}
	same("cp", "src")          // into itself
	same("cp", "missing", "x") // no source
	// too many: the rados tool prints its usage, partly on stdout
	if r := pureTool(ctx, c, "rados", nil, append(p, "cp", "src", "a", "b")...); r.code != 1 {
		t.Errorf("cp with three arguments: %+v", r)
	}
	same("--target-pool", "nosuchpool", "cp", "src")

	// touch: creates, and sets the modification time either tool reads
	ours("", "touch", "t", "1600000000")
	same("stat", "t")
	theirs("touch", "t2", "1700000000")
	same("stat", "t2")
	ours("", "touch", "a", "1500000000")
	same("stat", "a")
	same("touch", "t3", "notanumber")
	theirs("put", "fresh", in)
	same("stat2", "fresh") // microseconds
	same("stat2", "t")
	same("stat2", "missing")

	// clearomap: keys and header gone, a missing object fails
	theirs("setomapval", "cl", "k", "v")
	theirs("setomapheader", "cl", "h")
	theirs("setomapval", "cl2", "k", "v")
	ours("", "clearomap", "cl", "cl2")
	same("listomapvals", "cl")
	same("getomapheader", "cl")
	same("listomapkeys", "cl2")
	same("clearomap", "missing")

	// listwatchers: none, a missing object, two watches of ours
	same("listwatchers", "a")
	same("listwatchers", "missing")
	conn, err := rados.ConnectFromConf(ctx, cephconf.Args{Conf: c.Conf})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io, err := conn.IOContext(ctx, c.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		w, err := io.Watch(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close(ctx)
	}
	if r := same("listwatchers", "a"); strings.Count(r.stdout, "watcher=") != 2 {
		t.Errorf("listwatchers: %q", r.stdout)
	}

	// omap header: each tool's write read by the other, a missing object
	ours("", "setomapheader", "h", "header by purerbd")
	same("getomapheader", "h")
	theirs("setomapheader", "h2", "header by rados, longer than sixteen bytes")
	same("getomapheader", "h2")
	same("getomapheader", "missing")
	same("getomapheader", "h", filepath.Join(dir, "unused")) // both say "Writing to" on stderr
	same("getomapheader", "t")                               // no header

	// lock: each tool's locks read by the other, failures, a break
	ours("", "lock", "get", "lk", "l1", "--lock-cookie", "c1", "--lock-description", "by purerbd", "--lock-duration", "300")
	theirs("lock", "get", "lk", "l2", "--lock-type", "shared", "--lock-tag", "tg", "--lock-cookie", "c2")
	for _, args := range [][]string{
		{"lock", "list", "lk"}, {"lock", "info", "lk", "l1"}, {"lock", "info", "lk", "l2", "--pretty-format"},
		{"lock", "info", "lk", "l2", "-f", "json-pretty"}, {"lock", "list", "missing"}, {"lock", "info", "lk", "nope"},
		{"lock", "get", "lk", "l1"}, {"lock", "get", "lk", "l3", "--lock-type", "weird"},
		{"lock", "break", "lk", "l1", "notaname"}, {"lock", "break", "lk", "l1", "client.1"},
	} {
		same(args...)
	}
	var info struct {
		Lockers []struct{ Name string } `json:"lockers"`
	}
	if err := json.Unmarshal([]byte(theirs("lock", "info", "lk", "l2")), &info); err != nil || len(info.Lockers) != 1 {
		t.Fatalf("lock info: %+v %v", info, err)
	}
	ours("", "lock", "break", "lk", "l2", info.Lockers[0].Name, "--lock-cookie", "c2")
	if r := same("lock", "info", "lk", "l2"); !strings.Contains(r.stdout, `"lockers":[]`) {
		t.Errorf("lock info after the break: %s", r.stdout)
	}

	// ls in JSON, compact and pretty, one namespace and all of them
	ours("", "-N", "ns1", "create", "in-ns")
	for _, args := range [][]string{
		{"ls"}, {"ls", "--all"}, {"ls", "--format", "json"}, {"ls", "--format", "json-pretty"}, {"ls", "-f", "json", "--pretty-format"},
		{"-N", "ns1", "ls", "--format", "json"}, {"ls", "--all", "--format", "json"}, {"ls", "--format", "xml2"},
		// Pacific's rados prints these as plain text whatever the format
		{"stat", "a", "--format", "json"}, {"listomapkeys", "src", "-f", "json"}, {"listomapvals", "src", "--format", "json"},
		{"listxattr", "src", "--format", "json"}, {"lssnap", "--format", "json"}, {"getomapheader", "src", "--format", "json"},
	} {
		same(args...)
	}
}

// TestRadosWatchSnapsPoolsAgainstRadosCLI compares watch and notify
// (each tool's watcher notified by either tool), listsnaps, cppool and
// purge with the rados tool's, on one cluster.
func TestRadosWatchSnapsPoolsAgainstRadosCLI(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Run("watch-notify", func(t *testing.T) { testWatchNotify(t, ctx, c) })
	t.Run("listsnaps", func(t *testing.T) { testListsnaps(t, ctx, c) })
	// last: it gives the cluster's pool self-managed snapshots
	t.Run("cppool-purge", func(t *testing.T) { testPurgeCppool(t, ctx, c) })
}

// mustRados runs Ceph's rados and fails the test if it fails.
func mustRados(t *testing.T, ctx context.Context, c *radostest.Cluster, args ...string) string {
	t.Helper()
	var out strings.Builder
	if r := runCephTool(t, ctx, c, "rados", nil, &out, args...); r.code != 0 {
		t.Fatalf("rados %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return out.String()
}

// mustCeph runs Ceph's ceph tool and fails the test if it fails.
func mustCeph(t *testing.T, ctx context.Context, c *radostest.Cluster, args ...string) {
	t.Helper()
	if out, err := c.Ceph(ctx, args...); err != nil {
		t.Fatalf("ceph %s: %v: %s", strings.Join(args, " "), err, out)
	}
}
