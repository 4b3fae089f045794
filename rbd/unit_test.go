package rbd

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rbd/striper"
)

func TestLockCookie(t *testing.T) {
	if c := lockCookie(94294); c != "auto 94294" {
		t.Fatal(c)
	}
	for _, c := range []string{"auto 94294", "auto 0"} {
		if _, ok := parseLockCookie(c); !ok {
			t.Errorf("%q not parsed", c)
		}
	}
	for _, c := range []string{"", "auto ", "auto x", "manual 1", "auto94294"} {
		if _, ok := parseLockCookie(c); ok {
			t.Errorf("%q parsed", c)
		}
	}
}

func TestNewImageID(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		id := newImageID(0x1234abcd5678)
		if len(id) == 0 || len(id) > maxImageIDLength {
			t.Fatalf("id %q", id)
		}
		seen[id] = true
	}
	if len(seen) < 90 {
		t.Errorf("only %d distinct ids", len(seen))
	}
	if objectMapObject("abc", noSnap) != "rbd_object_map.abc" || objectMapObject("abc", 4) != "rbd_object_map.abc.0000000000000004" {
		t.Error("object map names")
	}
}

func TestFeatures(t *testing.T) {
	f, err := ParseFeatures("layering,exclusive-lock, object-map,fast-diff,deep-flatten")
	if err != nil || f != DefaultFeatures || uint64(f) != 61 {
		t.Fatalf("%v %v", f, err)
	}
	if s := DefaultFeatures.String(); s != "layering, exclusive-lock, object-map, fast-diff, deep-flatten" {
		t.Error(s)
	}
	if _, err := ParseFeatures("bogus"); err == nil {
		t.Error("bogus feature accepted")
	}
	h := &header{features: DefaultFeatures | FeatureJournaling}
	err = h.checkFeatures("img", false)
	var fe *FeatureError
	if !errors.As(err, &fe) || !errors.Is(err, ErrUnsupportedFeature) || fe.Features != FeatureJournaling {
		t.Errorf("journaling: %v", err)
	}
	if err := (&header{features: DefaultFeatures, incompat: FeatureLayering}).checkFeatures("img", true); err != nil {
		t.Error(err)
	}
}

func TestGatherScatter(t *testing.T) {
	l := striper.Layout{ObjectSize: 4096, StripeUnit: 1024, StripeCount: 3}
	p := make([]byte, 10000)
	for i := range p {
		p[i] = byte(i * 7)
	}
	out := make([]byte, len(p))
	for _, x := range l.MapExtents(500, uint64(len(p))) {
		scatter(out, x, gather(p, x))
	}
	if !bytes.Equal(out, p) {
		t.Fatal("gather/scatter round trip")
	}
	for _, x := range l.MapExtents(500, uint64(len(p))) {
		scatter(out, x, nil)
	}
	if !bytes.Equal(out, make([]byte, len(p))) {
		t.Fatal("scatter of nothing must zero")
	}
}

func TestForEach(t *testing.T) {
	var n atomic.Int64
	if err := forEach(context.Background(), 100, func(ctx context.Context, i int) error { n.Add(1); return nil }); err != nil || n.Load() != 100 {
		t.Fatal(err, n.Load())
	}
	boom := errors.New("boom")
	err := forEach(context.Background(), 100, func(ctx context.Context, i int) error {
		if i == 7 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
}

func TestObjectLocks(t *testing.T) {
	var l objectLocks
	// waits fails the test if ch is closed within 50 ms
	waits := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
			t.Fatal(what + " did not wait")
		case <-time.After(50 * time.Millisecond):
		}
	}
	h1 := l.lock(1)
	h2 := l.lock(2) // different object: no wait
	done := make(chan struct{})
	go func() { h := l.lock(1); h.unlock(); close(done) }()
	waits(done, "second lock of object 1")
	h1.unlock()
	<-done
	// shared holds of one object go together; an exclusive one waits
	// for both
	r1, r2 := l.rlock(3), l.rlock(3)
	excl := make(chan struct{})
	go func() { h := l.lock(3); h.unlock(); close(excl) }()
	waits(excl, "exclusive lock of object 3, with two shared holds,")
	r1.unlock()
	waits(excl, "exclusive lock of object 3, with one shared hold,")
	r2.unlock()
	<-excl
	h2.unlock()
	if len(l.m) != 0 {
		t.Errorf("lock table leaks %d entries", len(l.m))
	}
}
