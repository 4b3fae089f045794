package rbd

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/radostest"
)

var (
	connOnce sync.Once
	conn     *rados.Conn
	connErr  error
)

// testPool returns an I/O context on the test cluster's pool, over one
// connection shared by the package's tests.
func testPool(t *testing.T) *rados.IOContext {
	t.Helper()
	return testPoolB(t)
}

func testPoolB(t testing.TB) *rados.IOContext {
	t.Helper()
	radostest.SkipShort(t)
	connOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		conn, connErr = rados.Connect(ctx, rados.Config{MonHost: strings.Join(cluster.MonAddrs, ","), Key: cluster.AdminKey})
	})
	if connErr != nil {
		t.Fatalf("connecting to the cluster: %v", connErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	io, err := conn.IOContext(ctx, cluster.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	return io
}
