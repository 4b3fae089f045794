package msgr

import (
	"errors"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
)

// TestPostOrder: messages posted one after the other from one goroutine,
// half of them marked Alone (which a poster writes itself only when
// nothing is queued before it), go out in the order posted, in both
// modes, mixed with Sends; every one is answered.
func TestPostOrder(t *testing.T) {
	requireCluster(t)
	for _, mode := range []Mode{ModeCRC, ModeSecure} {
		c := dialMon(t, adminCephX(t), mode)
		const n = 60
		msgs := make([]*Message, n)
		posted := make([]Posted, n)
		for i := range msgs {
			msgs[i] = &Message{Type: msgMonGetMap, Version: 1, Alone: i%2 == 0}
			if i%10 == 9 {
				if err := c.Send(ctxT(t, 10*time.Second), msgs[i]); err != nil {
					t.Fatal(err)
				}
				continue
			}
			posted[i] = c.Post(ctxT(t, 10*time.Second), msgs[i])
		}
		for i := range posted {
			if err := c.Settle(posted[i]); err != nil {
				t.Fatalf("mode %v: message %d: %v", mode, i, err)
			}
		}
		for i, m := range msgs {
			if m.Seq != uint64(i+1) {
				t.Fatalf("mode %v: message %d posted went out with seq %d", mode, i, m.Seq)
			}
		}
		for i := 1; i <= n; i++ {
			if m := receive(t, c, msgMonMap); m.Seq != uint64(i) {
				t.Fatalf("mode %v: reply %d has seq %d", mode, i, m.Seq)
			}
		}
	}
}

// TestSettleWithdraws: while the peer reads nothing, the writer blocks
// in its write and later posts wait in the queue. Settling one of those
// withdraws it at once (ErrNotSent, never written: no seq); settling
// one being written waits for its write. Once the peer reads again the
// rest are written, and the withdrawn one is skipped.
func TestSettleWithdraws(t *testing.T) {
	requireCluster(t)
	p := newFaultProxy(t, cluster.MonAddrs[0])
	c, err := Dial(ctxT(t, 10*time.Second), cluster.MonAddrs[0], Config{
		Auth: adminCephX(t), PeerType: denc.EntityTypeMon, Mode: ModeCRC, DialContext: p.dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p.holdUp.Store(true)
	// more than the two sockets' buffers hold between the writer and
	// the held proxy
	const big, n = 1 << 20, 40
	data := make([]byte, big)
	msgs := make([]*Message, n)
	posted := make([]Posted, n)
	for i := range msgs {
		msgs[i] = &Message{Type: msgMonGetMap, Version: 1, Data: data}
		posted[i] = c.Post(ctxT(t, 10*time.Second), msgs[i])
	}
	// the writer takes at most maxBatchBytes per write: the last message
	// stays queued while the first batches fill the sockets
	start := time.Now()
	if err := c.Settle(posted[n-1]); !errors.Is(err, ErrNotSent) {
		t.Fatalf("settling a queued message: %v, want ErrNotSent", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("withdrawing a queued message took %v", d)
	}
	// the message being written when the sockets filled: taken by the
	// writer, its write not ended
	writing := -1
	for deadline := time.Now().Add(5 * time.Second); writing < 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		for i := n - 2; i >= 0; i-- {
			if r := posted[i].req; r.state.Load() == sendTaken && len(r.done) == 0 {
				writing = i
				break
			}
		}
	}
	if writing < 0 {
		t.Fatal("no posted message blocked in the writer's write while the peer read nothing")
	}
	settled := make(chan error, 1)
	go func() { settled <- c.Settle(posted[writing]) }()
	select {
	case err := <-settled:
		t.Fatalf("settling message %d, being written, returned (%v) before the peer read it", writing, err)
	case <-time.After(200 * time.Millisecond):
	}
	p.holdUp.Store(false)
	if err := <-settled; err != nil {
		t.Fatalf("message %d: %v", writing, err)
	}
	for i := range n - 1 {
		if i == writing {
			continue
		}
		if err := c.Settle(posted[i]); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if msgs[i].Seq != uint64(i+1) {
			t.Fatalf("message %d went out with seq %d", i, msgs[i].Seq)
		}
	}
	if msgs[n-1].Seq != 0 {
		t.Fatalf("the withdrawn message went out with seq %d", msgs[n-1].Seq)
	}
	// the connection stays usable, its sequence unbroken
	m := &Message{Type: msgMonGetMap, Version: 1}
	if err := c.Send(ctxT(t, 10*time.Second), m); err != nil {
		t.Fatal(err)
	}
	if m.Seq != n {
		t.Fatalf("the next message went out with seq %d, want %d", m.Seq, n)
	}
}
