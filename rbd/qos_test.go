package rbd

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseQoS(t *testing.T) {
	q, err := parseQoS(map[string]string{
		"conf_rbd_qos_iops_limit":               "100",
		"conf_rbd_qos_write_bps_limit":          "1048576",
		"conf_rbd_qos_write_bps_burst":          "4194304",
		"conf_rbd_qos_write_bps_burst_seconds":  "2",
		"conf_rbd_cache":                        "false",
		"conf_rbd_qos_schedule_tick_min":        "50",
		"some_other_key":                        "x",
		"conf_rbd_qos_read_iops_burst_seconds":  "3",
		"conf_rbd_qos_read_iops_limit":          "0",
		"conf_rbd_qos_read_bps_burst_seconds ":  "9", // not an option (trailing space)
		"conf_rbd_qos_write_iops_burst_seconds": "1",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := QoS{
		IOPS: QoSLimit{Limit: 100, BurstSeconds: 1}, ReadIOPS: QoSLimit{BurstSeconds: 3}, WriteIOPS: QoSLimit{BurstSeconds: 1},
		BPS: QoSLimit{BurstSeconds: 1}, ReadBPS: QoSLimit{BurstSeconds: 1},
		WriteBPS: QoSLimit{Limit: 1 << 20, Burst: 4 << 20, BurstSeconds: 2},
	}
	if q != want {
		t.Errorf("parseQoS = %+v\nwant %+v", q, want)
	}
	// a bad option leaves its limit off, the others apply
	for _, bad := range []map[string]string{
		{"conf_rbd_qos_iops_limit": "ten"},
		{"conf_rbd_qos_iops_limit": "-1"},
		{"conf_rbd_qos_iops_limit": "100", "conf_rbd_qos_iops_burst": "50"},
		{"conf_rbd_qos_iops_limit": "100", "conf_rbd_qos_iops_burst_seconds": "0"},
	} {
		bad["conf_rbd_qos_write_bps_limit"] = "4096"
		q, err := parseQoS(bad)
		if !errors.Is(err, ErrInvalid) || q.IOPS != (QoSLimit{BurstSeconds: 1}) || q.WriteBPS.Limit != 4096 {
			t.Errorf("parseQoS(%v): %+v, %v; want ErrInvalid, no IOPS limit, the write bps limit", bad, q, err)
		}
	}
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestTokenBucket checks the bucket's arithmetic on a clock that moves
// only when told: the initial burst, the refill rate, a request larger
// than the bucket (admitted once it is full, leaving a debt), the cap.
func TestTokenBucket(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	b := newTokenBucket(QoSLimit{Limit: 10, Burst: 20, BurstSeconds: 2}, c.now) // holds 40
	for i := range 40 {
		if w := b.reserve(1); w != 0 {
			t.Fatalf("take %d of the burst: wait %v", i, w)
		}
	}
	if w := b.reserve(1); w != 100*time.Millisecond {
		t.Errorf("empty bucket at 10/s: wait %v, want 100ms", w)
	}
	c.add(500 * time.Millisecond) // 5 tokens
	if w := b.reserve(5); w != 0 {
		t.Errorf("5 tokens after 500ms: wait %v", w)
	}
	if w := b.reserve(100); w != 4*time.Second {
		t.Errorf("more than the bucket holds, from empty: wait %v, want 4s (until full)", w)
	}
	c.add(10 * time.Second) // full (40), not 100
	if w := b.reserve(100); w != 0 {
		t.Errorf("more than the bucket holds, bucket full: wait %v", w)
	}
	// 60 tokens of debt: 40 to pay off plus 1 at 10/s
	if w := b.reserve(1); w != 6100*time.Millisecond {
		t.Errorf("after the debt: wait %v, want 6.1s", w)
	}
	if b := newTokenBucket(QoSLimit{}, c.now); b != nil || b.take(context.Background(), 1e9, nil) != nil {
		t.Error("no limit: a bucket, or a wait")
	}
	if b := newTokenBucket(QoSLimit{Limit: 7, BurstSeconds: 1}, c.now); b.capacity != 7 {
		t.Errorf("without a burst the bucket holds %v, want one second (7)", b.capacity)
	}
}

// TestQoSReplacedReleasesWaiters: a waiter held by old limits returns
// errQoSReplaced when new ones replace them, and a cancelled context
// ends a wait.
func TestQoSReplacedReleasesWaiters(t *testing.T) {
	s := newQoSState(QoS{IOPS: QoSLimit{Limit: 1, BurstSeconds: 1}}, time.Now)
	if err := s.take(context.Background(), true, 4096); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.take(context.Background(), true, 4096) }()
	time.Sleep(50 * time.Millisecond)
	close(s.done)
	if err := <-errc; !errors.Is(err, errQoSReplaced) {
		t.Errorf("waiter after replacement: %v", err)
	}
	s = newQoSState(QoS{ReadBPS: QoSLimit{Limit: 1, BurstSeconds: 1}}, time.Now)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.take(ctx, false, 1<<20); err != nil {
		t.Fatal(err) // a full bucket admits what exceeds it
	}
	if err := s.take(ctx, false, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("read after a 1 MiB debt at 1 B/s: %v", err)
	}
	if err := s.take(ctx, true, 1<<20); err != nil {
		t.Errorf("a write is not held by a read limit: %v", err)
	}
}

// countWrites writes 4 KiB blocks from 8 goroutines for d and returns
// how many completed.
func countWrites(t *testing.T, img *Image, d time.Duration) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	buf := make([]byte, 4096)
	for g := range 8 {
		wg.Go(func() {
			for i := int64(0); ctx.Err() == nil; i++ {
				if _, err := img.WriteAtContext(ctx, buf, (int64(g)*64+i%64)*4096); err == nil {
					n.Add(1)
				} else if ctx.Err() == nil {
					t.Errorf("write: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	return n.Load()
}

// TestQoSFromCephConfig sets limits with Ceph's own `rbd config image
// set` and `rbd config pool set` (librbd's options in the image's and
// the pool's metadata) and checks that purerbd applies them as librbd
// would: the image's over the pool's, a change applied to an open image
// within a second of Ceph's tool returning (its header notification),
// the rate held (counted from above: never more than the limit's rate
// plus its bucket), a removal lifting the limit.
func TestQoSFromCephConfig(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	if err := Create(ctx, testPool(t), name, 64<<20, CreateOptions{Order: 22}); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "config", "pool", "set", "rbd", "rbd_qos_bps_limit", "1048576")
	t.Cleanup(func() { rbdCLI(t, "config", "pool", "remove", "rbd", "rbd_qos_bps_limit") })
	rbdCLI(t, "config", "image", "set", spec, "rbd_qos_iops_limit", "20")
	img := openT(t, name, OpenOptions{})
	if q := img.QoS(); q.IOPS.Limit != 20 || q.BPS.Limit != 1<<20 {
		t.Fatalf("limits at open: %+v, want 20 IOPS from the image, 1 MiB/s from the pool", q)
	}
	const window = 1500 * time.Millisecond
	n := countWrites(t, img, window)
	if max := int64(20*window.Seconds()) + 20 + 1; n > max || n == 0 {
		t.Errorf("20 IOPS for %v: %d writes, want 1 to %d", window, n, max)
	}
	t.Logf("20 IOPS limit: %d writes in %v", n, window)

	// the image's bps over the pool's; a live change
	start := time.Now()
	rbdCLI(t, "config", "image", "set", spec, "rbd_qos_iops_limit", "200")
	applied := waitQoS(t, img, func(q QoS) bool { return q.IOPS.Limit == 200 })
	t.Logf("a change applied %v after Ceph's tool returned (%v after it started)", applied, time.Since(start))
	if applied > time.Second {
		t.Errorf("a change applied after %v, want within a second", applied)
	}
	n = countWrites(t, img, window)
	if max := int64(200*window.Seconds()) + 200 + 1; n > max || n <= int64(20*window.Seconds())+20+1 {
		t.Errorf("200 IOPS for %v: %d writes, want more than the old limit allowed, at most %d", window, n, max)
	}
	t.Logf("200 IOPS limit: %d writes in %v", n, window)

	// bandwidth: 4 MiB at 1 MiB/s with a 1 MiB bucket takes 3 s at least
	rbdCLI(t, "config", "image", "remove", spec, "rbd_qos_iops_limit")
	waitQoS(t, img, func(q QoS) bool { return q.IOPS.Limit == 0 && q.BPS.Limit == 1<<20 })
	begin := time.Now()
	for i := range 4 {
		if _, err := img.WriteAtContext(ctx, make([]byte, 1<<20), int64(i)<<20); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(begin); took < 2900*time.Millisecond {
		t.Errorf("4 MiB at a 1 MiB/s limit took %v, want at least 3 s", took)
	}
	rbdCLI(t, "config", "image", "set", spec, "rbd_qos_bps_limit", "0")
	waitQoS(t, img, func(q QoS) bool { return q == QoS{} || q.BPS.Limit == 0 })
	if q := img.QoS(); q != (QoS{}) && q.BPS.Limit != 0 {
		t.Errorf("the image's 0 over the pool's limit: %+v", q)
	}
	// a bad value (which rbd's config commands refuse to write):
	// librbd logs it and applies the rest; so does purerbd
	if err := img.MetadataSet(ctx, "conf_rbd_qos_write_iops_limit", "lots"); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "config", "image", "set", spec, "rbd_qos_read_iops_limit", "7")
	img2 := openT(t, name, OpenOptions{ReadOnly: true})
	if q := img2.QoS(); q.ReadIOPS.Limit != 7 || q.WriteIOPS.Limit != 0 {
		t.Errorf("limits with a bad option beside a good one: %+v", q)
	}
}

// waitQoS waits up to 5 s for the image's limits to satisfy ok and
// returns how long it took.
func waitQoS(t *testing.T, img *Image, ok func(QoS) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok(img.QoS()) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("limits still %+v after 5 s", img.QoS())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}
