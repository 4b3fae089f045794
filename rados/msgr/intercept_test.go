package msgr

import (
	"sync"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
)

// TestIntercept: the messages Config.Intercept takes never reach
// Incoming, the others do, in order, and Intercept sees them all in the
// order received.
func TestIntercept(t *testing.T) {
	requireCluster(t)
	var mu sync.Mutex
	var offered, taken []uint64
	c, err := Dial(ctxT(t, 10*time.Second), cluster.MonAddrs[0], Config{
		Auth: adminCephX(t), PeerType: denc.EntityTypeMon, Mode: ModeCRC,
		Intercept: func(m *Message) bool {
			mu.Lock()
			defer mu.Unlock()
			offered = append(offered, m.Seq)
			if m.Type == msgMonMap && m.Seq%3 == 0 {
				taken = append(taken, m.Seq)
				return true
			}
			return false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	const n = 30
	for range n {
		if err := c.Send(ctxT(t, 10*time.Second), &Message{Type: msgMonGetMap, Version: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var queued []uint64
	for len(queued) < n-n/3 {
		queued = append(queued, receive(t, c, msgMonMap).Seq)
	}
	for i, seq := range queued {
		if want := uint64(i + 1 + i/2); seq != want {
			t.Fatalf("Incoming's message %d has seq %d, want %d (got %v)", i, seq, want, queued)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(taken) != n/3 {
		t.Fatalf("Intercept took %v, want every third of %d", taken, n)
	}
	for i, seq := range offered {
		if seq != uint64(i+1) {
			t.Fatalf("Intercept was offered %v, want seqs 1..%d in order", offered, n)
		}
	}
	if len(offered) != n {
		t.Fatalf("Intercept was offered %d messages, want %d", len(offered), n)
	}
}
