package osdc

import (
	"context"
	"flag"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/monc"
	"github.com/purerbd/purerbd/rados/radostest"
)

var cluster *radostest.Cluster

func TestMain(m *testing.M) {
	if fuzzingOnly() {
		os.Exit(m.Run())
	}
	os.Exit(radostest.Main(m, radostest.Options{}, &cluster))
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

// monSource adapts the monitor client to MapSource for the tests.
type monSource struct {
	mc *monc.Client
	mu sync.Mutex
	in bool
}

func (s *monSource) RequestOSDMap(have uint32) {
	s.mu.Lock()
	if s.in {
		s.mu.Unlock()
		return
	}
	s.in = true
	s.mu.Unlock()
	go func() {
		defer func() { s.mu.Lock(); s.in = false; s.mu.Unlock() }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = s.mc.RequestOSDMap(ctx, 0)
	}()
}

func (s *monSource) LatestOSDMapEpoch(ctx context.Context) (uint32, error) {
	n, _, err := s.mc.GetVersion(ctx, "osdmap")
	return uint32(n), err
}

// testClient is a monitor client and an objecter fed by its osdmap
// subscription.
type testClient struct {
	mc   *monc.Client
	ob   *Objecter
	pool int64
}

func connect(t testing.TB, c *radostest.Cluster, tune func(*Config)) *testClient {
	t.Helper()
	radostest.SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key, err := auth.ParseKey(c.AdminKey)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := monc.New(ctx, monc.Config{MonAddrs: c.MonAddrs, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Auth: mc.Auth(), Maps: &monSource{mc: mc}}
	if tune != nil {
		tune(&cfg)
	}
	ob, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := mc.SubscribeOSDMap(0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m := range sub.C() {
			if err := ob.HandleOSDMap(m); err != nil {
				t.Logf("osdmap: %v", err)
			}
		}
	}()
	t.Cleanup(func() {
		sub.Close()
		ob.Close()
		mc.Close()
		wg.Wait()
	})
	if err := ob.WaitForMap(ctx, 1); err != nil {
		t.Fatal(err)
	}
	pool, ok := ob.Map().PoolByName(c.Pool)
	if !ok {
		t.Fatalf("no pool %q in the map", c.Pool)
	}
	return &testClient{mc: mc, ob: ob, pool: pool}
}
