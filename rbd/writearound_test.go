package rbd

import (
	"context"
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// pauseOSD stops the test cluster's OSD until the returned function (also
// run at cleanup) resumes it.
func pauseOSD(t *testing.T) (resume func()) {
	t.Helper()
	radostest.SkipShort(t)
	if err := cluster.Pause("osd.0"); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume = func() {
		if !resumed {
			resumed = true
			if err := cluster.Resume("osd.0"); err != nil {
				t.Errorf("resuming osd.0: %v", err)
			}
		}
	}
	t.Cleanup(resume)
	return resume
}

func shortCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestWriteAroundModel writes, discards and reads overlapping ranges in
// sequence through the write-around cache (a small one, so that writes
// also wait for room): every read sees every write acknowledged before
// it, and after Close librbd reads exactly the model, with a correct
// object map. Once, the OSD stops while eight writes with gaps between
// them go into one object: the cache acknowledges them, the first flies
// and the others wait behind it, then ride in one OSD op together once
// the OSD is back. So the check covers riding writes whatever the timing
// of the rest of the run (under -race the client can be slow enough that
// no write waits behind another by itself).
func TestWriteAroundModel(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	const size = 8 << 20
	if err := Create(ctx, testPool(t), name, size, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{WriteAround: WriteAround{MaxDirty: 1 << 20}})
	if !img.wa.active() {
		t.Fatal("write-around cache not active")
	}
	model := make([]byte, size)
	r := rand.New(rand.NewPCG(7, 7))
	hot := int64(3 << 20) // most I/O lands in [0, 3M): overlaps are frequent
	var maxDirty int64
	resumed := make(chan error, 1)
	for i := range 3000 {
		if i == 700 {
			if err := cluster.Pause("osd.0"); err != nil {
				t.Fatal(err)
			}
			for k := range int64(8) {
				off := 4<<20 + k*128<<10
				p := randBytes(r, 64<<10)
				copy(model[off:], p)
				if _, err := img.WriteAtContext(ctx, p, off); err != nil {
					t.Fatalf("write %d with the OSD stopped: %v", k, err)
				}
			}
			go func() {
				time.Sleep(100 * time.Millisecond)
				resumed <- cluster.Resume("osd.0")
			}()
		}
		n := int64(512 * (1 + r.IntN(256)))
		off := r.Int64N(hot - n)
		if i%10 == 0 {
			off = r.Int64N(size - n)
		}
		switch k := r.IntN(20); {
		case k < 14:
			p := randBytes(r, int(n))
			copy(model[off:], p)
			if _, err := img.WriteAtContext(ctx, p, off); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
			clear(p) // the cache must have copied it
		case k < 16:
			clear(model[off : off+n])
			if err := img.Discard(ctx, off, n); err != nil {
				t.Fatalf("discard %d: %v", i, err)
			}
		default:
			got := make([]byte, n)
			if _, err := img.ReadAtContext(ctx, got, off); err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
			mustEqual(t, "read after acknowledged writes", got, model[off:off+n])
		}
		img.wa.mu.Lock()
		maxDirty = max(maxDirty, img.wa.dirty)
		img.wa.mu.Unlock()
		if i == 1500 {
			if err := <-resumed; err != nil {
				t.Fatalf("resuming osd.0: %v", err)
			}
			if err := img.Flush(ctx); err != nil {
				t.Fatalf("flush: %v", err)
			}
		}
	}
	img.merge.mu.Lock()
	rode := img.merge.rode
	img.merge.mu.Unlock()
	t.Logf("most bytes in flight after an acknowledged write: %d; %d held writes sent in another's OSD op", maxDirty, rode)
	if rode == 0 {
		t.Error("no held write was sent in another's OSD op: the check below does not cover them")
	}
	if maxDirty == 0 {
		t.Error("no write was ever acknowledged ahead of the OSD")
	}
	if maxDirty > 1<<20+256*512 {
		t.Errorf("%d bytes in flight, over MaxDirty", maxDirty)
	}
	checkBothWays(t, img, spec, model)
}

// TestWriteAroundAheadOfOSD stops the OSD: writes are acknowledged until
// MaxDirty bytes wait for it, then wait for the OSD themselves, as
// without the cache; reads of those ranges and Flush wait for the OSD;
// once it is back everything lands.
func TestWriteAroundAheadOfOSD(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	const size = 4 << 20
	if err := Create(ctx, testPool(t), name, size, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{WriteAround: WriteAround{MaxDirty: 64 << 10, WritethroughUntilFlush: true}})
	model := make([]byte, size)
	r := rand.New(rand.NewPCG(3, 3))
	write := func(ctx context.Context, off int64, n int) error {
		p := randBytes(r, n)
		if _, err := img.WriteAtContext(ctx, p, off); err != nil {
			return err
		}
		copy(model[off:], p)
		return nil
	}
	if err := write(ctx, 0, 4096); err != nil { // takes the lock, maps object 0
		t.Fatal(err)
	}

	// writethrough until the first flush: a write waits for the OSD
	resume := pauseOSD(t)
	if err := write(shortCtx(t, time.Second), 8192, 4096); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write before the first flush with the OSD stopped: %v, want a deadline error", err)
	}
	resume()
	if err := write(ctx, 8192, 4096); err != nil { // the timed-out write is superseded
		t.Fatal(err)
	}
	if err := img.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	resume = pauseOSD(t)
	t0 := time.Now()
	for i := range 16 { // 64 KiB: exactly MaxDirty
		if err := write(shortCtx(t, 5*time.Second), int64(i)*8192, 4096); err != nil {
			t.Fatalf("write %d with the OSD stopped: %v", i, err)
		}
	}
	t.Logf("16 writes acknowledged in %v with the OSD stopped", time.Since(t0).Round(time.Microsecond))
	if err := write(shortCtx(t, time.Second), 1<<20, 4096); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write beyond MaxDirty: %v, want a deadline error", err)
	}
	if _, err := img.ReadAtContext(shortCtx(t, time.Second), make([]byte, 4096), 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read of a range in flight: %v, want a deadline error", err)
	}
	if err := img.Flush(shortCtx(t, time.Second)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flush with the OSD stopped: %v, want a deadline error", err)
	}
	resume()
	if err := img.Flush(ctx); err != nil {
		t.Fatalf("flush after the OSD came back: %v", err)
	}
	checkBothWays(t, img, spec, model)
}

// TestWriteAroundFailureReported makes the OSD refuse a write the cache
// has acknowledged (osd_max_write_size lowered to 4 MB): Flush reports it
// with an *ErrWriteBehind naming the write, instead of losing it
// silently, and the next Flush is clean again.
func TestWriteAroundFailureReported(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	if err := Create(ctx, testPool(t), name, 16<<20, CreateOptions{Order: 23}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{WriteAround: WriteAround{MaxDirty: DefaultMaxDirty}})
	if _, err := img.WriteAtContext(ctx, []byte("before"), 0); err != nil {
		t.Fatal(err)
	}
	setMaxWrite := func(mb string) {
		if out, err := cluster.Ceph(context.Background(), "tell", "osd.0", "config", "set", "osd_max_write_size", mb); err != nil {
			t.Fatalf("setting osd_max_write_size: %v %s", err, out)
		}
	}
	setMaxWrite("4")
	t.Cleanup(func() { setMaxWrite("90") })
	if _, err := img.WriteAtContext(ctx, make([]byte, 6<<20), 4096); err != nil {
		t.Fatalf("a write the cache should acknowledge: %v", err)
	}
	err := img.Flush(ctx)
	t.Logf("flush: %v", err)
	var wb *ErrWriteBehind
	if !errors.As(err, &wb) || !errors.Is(err, syscall.EMSGSIZE) {
		t.Fatalf("flush after a refused write: %v, want an *ErrWriteBehind wrapping EMSGSIZE", err)
	}
	if wb.Off != 4096 || wb.Len != 6<<20 {
		t.Errorf("ErrWriteBehind names %d bytes at %d, want %d at 4096", wb.Len, wb.Off, 6<<20)
	}
	if err := img.Flush(ctx); err != nil {
		t.Errorf("second flush: %v, want nil (the failure was reported once)", err)
	}
	setMaxWrite("90")
	if _, err := img.WriteAtContext(ctx, []byte("after"), 8192); err != nil {
		t.Fatal(err)
	}
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}
	got := rbdExport(t, "rbd/"+name)
	if string(got[:6]) != "before" || string(got[8192:8197]) != "after" {
		t.Errorf("rbd export: %q ... %q", got[:6], got[8192:8197])
	}
}

// TestWriteAroundLargeWrites checks the admission rule for large writes:
// early only while the bytes in flight stay under largeDirty, whatever
// MaxDirty allows; small writes up to MaxDirty; frozen writes, which the
// cache does not copy, up to MaxDirty whatever their size.
func TestWriteAroundLargeWrites(t *testing.T) {
	w := newWriteAround(WriteAround{MaxDirty: DefaultMaxDirty})
	defer w.close()
	ctx := context.Background()
	var next uint64
	copies := true
	admit := func(n uint64, wantEarly bool) uint64 {
		t.Helper()
		seq, early, err := w.admit(ctx, byteRange{next, next + n}, copies)
		if err != nil || early != wantEarly {
			t.Fatalf("admit %d bytes with %d in flight: early %v, err %v; want early %v", n, w.dirty, early, err, wantEarly)
		}
		next += 16 << 20 // no overlap: admit would wait for it
		return seq
	}
	first := admit(largeDirty, true) // nothing in flight
	admit(largeWrite, false)         // over largeDirty: to the OSDs, its caller waits
	small := admit(largeWrite-1, true)
	w.complete(first, nil)
	admit(largeDirty-largeWrite+1, true)
	admit(largeWrite, false)
	w.complete(small, nil) // largeDirty-largeWrite+1 in flight
	admit(1, true)
	admit(1<<20, false)
	admit(64<<10, true)

	// frozen: up to MaxDirty, then to the OSDs
	copies = false
	admit(largeDirty, true)
	admit(uint64(DefaultMaxDirty-w.dirty), true)
	admit(1, false)
}
