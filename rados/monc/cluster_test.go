package monc

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/radostest"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
)

// shared is the cluster most tests use, booted by the first test that
// asks for it (so decoder tests and fuzzing need no Ceph) and stopped by
// TestMain.
var shared struct {
	once sync.Once
	c    *radostest.Cluster
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if c := shared.c; c != nil {
		if code != 0 {
			c.Options.KeepDir = true
			fmt.Fprintf(os.Stderr, "monc: tests failed; cluster kept at %s; log tails:%s\n", c.Dir, c.LogTails(30))
		}
		if err := c.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "monc: stopping the cluster: %v\n", err)
		}
	}
	os.Exit(code)
}

// sharedCluster returns the package's cluster (one mon, one OSD, pool
// "rbd", Ceph's default connection modes). Without Ceph the test fails.
func sharedCluster(t testing.TB) *radostest.Cluster {
	t.Helper()
	radostest.SkipShort(t)
	shared.once.Do(func() {
		shared.c, shared.err = cephcluster.Start(context.Background(), cephcluster.Options{})
	})
	if shared.err != nil {
		t.Fatalf("radostest: %v", shared.err)
	}
	return shared.c
}

// testLogger sends the client's log to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// adminConfig is a Config for client.admin of cl.
func adminConfig(t testing.TB, cl *radostest.Cluster) Config {
	t.Helper()
	key, err := auth.ParseKey(cl.AdminKey)
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		MonAddrs:       cl.MonAddrs,
		Key:            key,
		ConnectTimeout: 20 * time.Second,
		Logger:         testLogger(t),
	}
}

// connect returns a client of cl, closed when the test ends.
func connect(t testing.TB, cfg Config) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testContext is a context bounded for one test step.
func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitGoroutines waits until no more than n goroutines run, and fails
// with their stacks otherwise.
func waitGoroutines(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left, want <= %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
