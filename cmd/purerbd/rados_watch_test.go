package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/cephconf"
	"github.com/purerbd/purerbd/rados/radostest"
)

// idNumbers are the numbers of watch and notify lines that differ from
// run to run: cookies, notify ids and client ids.
var idNumbers = regexp.MustCompile(`(cookie|notify_id|from|client\.) ?[0-9]+`)

// watchShape replaces the ids in watch and notify output by N, keeping
// the hexdumps, so two runs of the same events compare equal.
func watchShape(s string) string { return idNumbers.ReplaceAllString(s, "$1 N") }

// testWatchNotify runs watch and notify in both directions: Ceph's
// watcher notified by Ceph's notify and by purerbd's, purerbd's watcher
// notified by both; then a watcher that never answers, and a missing
// object. The printed lines must have the same shape.
func testWatchNotify(t *testing.T, ctx context.Context, c *radostest.Cluster) {
	p := []string{"-p", c.Pool}
	mustRados(t, ctx, c, append(p, "create", "w-ceph")...)
	mustRados(t, ctx, c, append(p, "create", "w-pure")...)
	waitWatchers := func(oid string, n int) {
		t.Helper()
		for strings.Count(mustRados(t, ctx, c, append(p, "listwatchers", oid)...), "watcher=") != n {
			if ctx.Err() != nil {
				t.Fatalf("%s never had %d watchers", oid, n)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// Ceph's watcher, until its standard input closes
	ceph := c.ToolCommand(ctx, "rados", append(p, "watch", "w-ceph")...)
	var cephOut, cephErr bytes.Buffer
	ceph.Stdout, ceph.Stderr = &cephOut, &cephErr
	cephIn, err := ceph.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ceph.Start(); err != nil {
		t.Fatal(err)
	}
	// purerbd's watcher, until its standard input closes
	pureIn, pureInW := io.Pipe()
	pureDone := make(chan cmdResult, 1)
	go func() { pureDone <- pureTool(ctx, c, "rados", pureIn, append(p, "watch", "w-pure")...) }()
	waitWatchers("w-ceph", 1)
	waitWatchers("w-pure", 1)

	// each message by either tool to either watcher; the long one's
	// hexdumps have a row Ceph collapses
	for _, oid := range []string{"w-ceph", "w-pure"} {
		for _, msg := range []string{"hello from rados", strings.Repeat("a", 64)} {
			var want strings.Builder
			r := runCephTool(t, ctx, c, "rados", nil, &want, append(p, "notify", oid, msg)...)
			got := pureTool(ctx, c, "rados", nil, append(p, "notify", oid, msg)...)
			if got.code != r.code || r.code != 0 || watchShape(got.stdout) != watchShape(want.String()) {
				t.Errorf("notify %s %q:\n purerbd exit %d:\n%s%s\n rados exit %d:\n%s%s", oid, msg, got.code, got.stdout, got.stderr,
					r.code, want.String(), r.stderr)
			}
			if !strings.Contains(got.stdout, "reply client.") {
				t.Errorf("notify %s: no reply: %q", oid, got.stdout)
			}
		}
	}

	_ = cephIn.Close()
	if err := ceph.Wait(); err != nil {
		t.Fatalf("rados watch: %v: %s", err, cephErr.String())
	}
	_ = pureInW.Close()
	pure := <-pureDone
	if pure.code != 0 {
		t.Fatalf("purerbd rados watch: exit %d: %s", pure.code, pure.stderr)
	}
	if !strings.Contains(cephOut.String(), "\n*\n") {
		t.Errorf("Ceph's watcher collapsed no hexdump row:\n%s", cephOut.String())
	}
	if watchShape(pure.stdout) != watchShape(cephOut.String()) {
		t.Errorf("watch:\n purerbd:\n%s\n rados:\n%s", pure.stdout, cephOut.String())
	}
	if n := strings.Count(pure.stdout, "NOTIFY cookie"); n != 4 {
		t.Errorf("purerbd's watcher printed %d notifications:\n%s", n, pure.stdout)
	}
	waitWatchers("w-pure", 0) // the watch was removed at exit

	// A watcher that never acknowledges: both notifiers wait for it,
	// print it as timed out and fail.
	conn, err := rados.ConnectFromConf(ctx, cephconf.Args{Conf: c.Conf})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ioc, err := conn.IOContext(ctx, c.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	w, err := ioc.Watch(ctx, "w-pure")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	r := sameShape(t, ctx, c, append(p, "notify", "w-pure", "anyone?")...)
	if r.code == 0 || !strings.Contains(r.stdout, "timeout client.") {
		t.Errorf("notify of a silent watcher: %+v", r)
	}

	sameAsRados(t, ctx, c, append(p, "notify", "missing", "x")...)
	sameAsRados(t, ctx, c, append(p, "watch", "missing")...)
	sameExit(t, ctx, c, append(p, "notify", "w-ceph")...) // no message
}

// sameShape runs args through both tools and fails the test
// unless the exit codes and the shapes of standard output agree; it
// returns purerbd's result.
func sameShape(t *testing.T, ctx context.Context, c *radostest.Cluster, args ...string) cmdResult {
	t.Helper()
	var out strings.Builder
	want := runCephTool(t, ctx, c, "rados", nil, &out, args...)
	got := pureTool(ctx, c, "rados", nil, args...)
	if got.code != want.code || watchShape(got.stdout) != watchShape(out.String()) {
		t.Errorf("rados %s:\n purerbd exit %d, stdout:\n%s stderr: %s\n rados exit %d, stdout:\n%s stderr: %s",
			strings.Join(args, " "), got.code, got.stdout, got.stderr, want.code, out.String(), want.stderr)
	}
	return got
}
