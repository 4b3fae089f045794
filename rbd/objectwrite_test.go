package rbd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
)

// Concurrent writes into one data object: they are in flight together
// (the OSD orders them, as it does librbd's), while the object map is
// still updated before the data and a clone's object is copied up once.

// watchedObjects passes every call on to the real cluster and watches
// the writes to the image's data objects: how many are in flight at once
// per object, and how many copy-ups each object got. A write into an
// object waits (at most gateWait) until gate writes are in flight into
// it, so that writes the image sends together are seen together.
type watchedObjects struct {
	objects
	prefix   string
	gate     int
	gateWait time.Duration

	mu      sync.Mutex
	objs    map[string]*watchedObject
	copyups map[string]int
}

type watchedObject struct {
	inflight, max int
	open          chan struct{} // closed once gate writes were in flight
	opened        bool
}

func watchData(img *Image, gate int) *watchedObjects {
	w := &watchedObjects{objects: img.data, prefix: img.hdr.Load().prefix, gate: gate, gateWait: time.Second,
		objs: map[string]*watchedObject{}, copyups: map[string]int{}}
	img.data = w
	return w
}

func (w *watchedObjects) write(ctx context.Context, oid string, snapc denc.SnapContext, op *rados.WriteOp) error {
	if !strings.HasPrefix(oid, w.prefix) {
		return w.objects.write(ctx, oid, snapc, op)
	}
	w.mu.Lock()
	o := w.objs[oid]
	if o == nil {
		o = &watchedObject{open: make(chan struct{})}
		w.objs[oid] = o
	}
	if strings.Contains(op.String(), "call rbd.copyup") {
		w.copyups[oid]++
	}
	o.inflight++
	o.max = max(o.max, o.inflight)
	if o.inflight >= w.gate && !o.opened {
		o.opened = true
		close(o.open)
	}
	w.mu.Unlock()
	select {
	case <-o.open:
	case <-time.After(w.gateWait):
	}
	err := w.objects.write(ctx, oid, snapc, op)
	w.mu.Lock()
	o.inflight--
	w.mu.Unlock()
	return err
}

// maxInFlight returns the most writes seen in flight into object objno.
func (w *watchedObjects) maxInFlight(objno uint64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for oid, o := range w.objs {
		if strings.HasSuffix(oid, fmt.Sprintf(".%016x", objno)) {
			return o.max
		}
	}
	return 0
}

// writeChunks writes chunk-sized pieces of model (one goroutine each) at
// the given offsets, discarding instead where discard says so, and
// updates model.
func writeChunks(ctx context.Context, t *testing.T, img *Image, model []byte, offs []int, chunk int, discard func(i int) bool) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(len(offs)), uint64(chunk)))
	var wg sync.WaitGroup
	errs := make([]error, len(offs))
	for i, off := range offs {
		var p []byte
		if discard(i) {
			clear(model[off : off+chunk])
		} else {
			p = randBytes(r, chunk)
			copy(model[off:], p)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p == nil {
				errs[i] = img.Discard(ctx, int64(off), int64(chunk))
			} else {
				_, errs[i] = img.WriteAtContext(ctx, p, int64(off))
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("I/O %d at %d: %v", i, offs[i], err)
		}
	}
}

// TestConcurrentWritesIntoOneObject sends 16 writes, none continuing
// another, into one object at once and sees them in flight together;
// then writes and discards into fresh objects concurrently and has librbd
// check data and object map.
func TestConcurrentWritesIntoOneObject(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	const size, chunk = 16 << 20, 64 << 10
	if err := Create(ctx, testPool(t), name, size, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{})
	model := make([]byte, size)
	// object 0 exists (and the map says so) before the concurrent writes
	writeChunks(ctx, t, img, model, []int{0}, chunk, func(int) bool { return false })

	const gate = 4
	w := watchData(img, gate)
	// every other chunk: writes that continue one in flight would be
	// merged behind it (TestSequentialWritesMerge)
	offs := make([]int, 16)
	for i := range offs {
		offs[i] = (2*i + 1) * chunk
	}
	writeChunks(ctx, t, img, model, offs, chunk, func(int) bool { return false })
	if got := w.maxInFlight(0); got < gate {
		t.Errorf("at most %d of 16 concurrent writes into one object were in flight together, want >= %d", got, gate)
	}

	// fresh objects 1..3: object map transitions racing data writes,
	// partial discards (zero, truncate) and whole-object discards
	w.gateWait = 0
	offs = offs[:0]
	for off := 4 << 20; off < size; off += chunk {
		offs = append(offs, off)
	}
	writeChunks(ctx, t, img, model, offs, chunk, func(i int) bool { return i%5 == 3 })
	if err := img.Discard(ctx, 8<<20, 4<<20); err != nil { // object 2, whole
		t.Fatal(err)
	}
	clear(model[8<<20 : 12<<20])
	writeChunks(ctx, t, img, model, []int{8<<20 + chunk, 8<<20 + 5*chunk, 12<<20 - chunk, 12 << 20}, chunk,
		func(i int) bool { return i == 2 })
	checkBothWays(t, img, spec, model)
}

// TestConcurrentCopyup writes and discards concurrently into a clone's
// objects that still read through to the parent: each is copied up
// exactly once, with and without an object map, and librbd reads what
// was written over the parent's data.
func TestConcurrentCopyup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		features Feature
	}{
		{"objectmap", 0},
		{"nomap", FeatureLayering},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			parent := imageName(t)
			const size, chunk = 8 << 20, 64 << 10
			data := randBytes(rand.New(rand.NewPCG(3, 4)), size)
			rbdImport(t, data, "rbd/"+parent)
			rbdCLI(t, "snap", "create", "rbd/"+parent+"@base")
			rbdCLI(t, "snap", "protect", "rbd/"+parent+"@base")
			child := imageName(t)
			if err := Clone(ctx, testPool(t), parent, "base", testPool(t), child, CreateOptions{Features: tc.features}); err != nil {
				t.Fatal(err)
			}
			img := openT(t, child, OpenOptions{})
			w := watchData(img, 0)
			w.gateWait = 0
			model := append([]byte(nil), data...)
			var offs []int
			for off := 0; off < size; off += 4 * chunk { // 16 I/Os into each object
				offs = append(offs, off+chunk)
			}
			writeChunks(ctx, t, img, model, offs, chunk, func(i int) bool { return i%4 == 1 })
			for objno := uint64(0); objno < 2; objno++ {
				oid := img.hdr.Load().prefix + fmt.Sprintf(".%016x", objno)
				w.mu.Lock()
				n := w.copyups[oid]
				w.mu.Unlock()
				if n != 1 {
					t.Errorf("object %d copied up %d times, want once", objno, n)
				}
			}
			mustEqual(t, "purerbd read", readAll(t, img), model)
			if err := img.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.features == 0 {
				rbdCLI(t, "object-map", "check", "rbd/"+child)
			}
			mustEqual(t, "rbd export", rbdExport(t, "rbd/"+child), model)
		})
	}
}
