package nbd_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/bufpool/bufpooltest"
	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// TestSharedBuffers: two servers given one Config.Buffers take their
// WRITE payload and READ reply buffers from it, and give every one back.
func TestSharedBuffers(t *testing.T) {
	var pool bufpooltest.Counting
	ctx := context.Background()
	data := bytes.Repeat([]byte("purerbd!"), 64<<10/8)
	for i := range 2 {
		srv := startGated(t, newGated(t, 1<<20, 1<<62), nbd.Config{Buffers: &pool})
		c := dial(t, srv, nbdtest.Options{Export: "g"})
		if err := c.WriteAt(ctx, data, 0, 0); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		if err := c.ReadAt(ctx, got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("server %d: read back other bytes than written", i)
		}
		if g, _ := pool.Lent(); g < int64(2*(i+1)) {
			t.Fatalf("after server %d's write and read the pool lent %d buffers, want at least %d", i, g, 2*(i+1))
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		g, p := pool.Lent()
		if g == p {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d buffers lent, %d given back", g, p)
		}
	}
}
