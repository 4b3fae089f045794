package rados

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

var cluster *radostest.Cluster

func TestMain(m *testing.M) {
	if fuzzingOnly() {
		os.Exit(m.Run())
	}
	if testing.Short() {
		// The examples connect through CEPH_CONF and an example cannot
		// skip itself: leave them out of the daemon-free tier.
		skip := "^Example"
		if s := flag.Lookup("test.skip").Value.String(); s != "" {
			skip = s + "|" + skip
		}
		if err := flag.Set("test.skip", skip); err != nil {
			panic(err)
		}
	}
	// The examples connect the way programs do, through CEPH_CONF: put
	// the cluster where that points.
	dir, err := os.MkdirTemp("", "purerbd-rados-")
	if err != nil {
		panic(err)
	}
	os.Setenv("CEPH_CONF", filepath.Join(dir, "ceph.conf"))
	code := radostest.Main(m, radostest.Options{Dir: dir}, &cluster)
	if code == 0 {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// fuzzingOnly reports whether this process only fuzzes (a fuzz worker,
// or -fuzz with -run '^$'): the fuzz targets need no cluster.
func fuzzingOnly() bool {
	flag.Parse()
	get := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	return get("test.fuzzworker") == "true" || (get("test.fuzz") != "" && get("test.run") == "^$")
}

// connectTest connects to the package's cluster with an explicit
// Config, and checks at cleanup that Close leaves no goroutine behind.
func connectTest(t testing.TB) *Conn {
	t.Helper()
	return connectTestConfig(t, Config{})
}

// connectTestConfig connects as client.admin with cfg's other settings.
func connectTestConfig(t testing.TB, cfg Config) *Conn {
	t.Helper()
	radostest.SkipShort(t)
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg.MonHost, cfg.Key = cluster.MonHost(), cluster.AdminKey
	conn, err := Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("goroutines: %d before Connect, %d after Close:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	return conn
}

func testIO(t testing.TB, conn *Conn, ns string) *IOContext {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	io, err := conn.IOContext(ctx, cluster.Pool, ns)
	if err != nil {
		t.Fatal(err)
	}
	return io
}
