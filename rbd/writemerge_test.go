package rbd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/bufpool/bufpooltest"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
)

// heldObjects passes every call on to the real cluster and records the
// writes to the image's data objects; while hold is open, the first data
// write waits for it.
type heldObjects struct {
	objects
	prefix string

	mu     sync.Mutex
	writes []string // "OID [ops]"
	hold   chan struct{}
	held   chan struct{} // closed once a write waits on hold
	armed  bool
	once   sync.Once
}

func holdData(img *Image) *heldObjects {
	h := &heldObjects{objects: img.data, prefix: img.hdr.Load().prefix}
	img.data = h
	return h
}

// arm makes the next data write wait until release.
func (h *heldObjects) arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold, h.held, h.armed = make(chan struct{}), make(chan struct{}), true
}

func (h *heldObjects) release() { h.once.Do(func() { close(h.hold) }) }

func (h *heldObjects) write(ctx context.Context, oid string, snapc denc.SnapContext, op *rados.WriteOp) error {
	if !strings.HasPrefix(oid, h.prefix) {
		return h.objects.write(ctx, oid, snapc, op)
	}
	h.mu.Lock()
	h.writes = append(h.writes, oid[len(h.prefix):]+" "+op.String())
	var hold chan struct{}
	if h.armed {
		h.armed = false
		hold = h.hold
		close(h.held)
	}
	h.mu.Unlock()
	if hold != nil {
		<-hold
	}
	return h.objects.write(ctx, oid, snapc, op)
}

func (h *heldObjects) recorded() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.writes)
}

// heldCount returns how many writes wait behind the flying writes into
// object objno.
func (m *writeMerger) heldCount(objno uint64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	if o := m.objs[objno]; o != nil {
		for _, f := range o.flying {
			if f.next != nil && !f.next.sent {
				n += f.next.n
			}
		}
	}
	return n
}

// TestSequentialWritesMerge: writes that continue a write still in flight
// into the same object wait for it and then go to the OSD as one write,
// gathered in a buffer from OpenOptions.MergeBuffers that goes back once
// it is sent; a write that does not continue it goes at once; librbd
// reads the result.
func TestSequentialWritesMerge(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	const size, chunk = 8 << 20, 16 << 10
	if err := Create(ctx, testPool(t), name, size, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pool bufpooltest.Counting
	img := openT(t, name, OpenOptions{MergeBuffers: &pool})
	model := make([]byte, size)
	// objects 0 and 1 exist (and the map says so) before the writes
	writeChunks(ctx, t, img, model, []int{0, 4 << 20}, chunk, func(int) bool { return false })
	h := holdData(img)
	r := rand.New(rand.NewPCG(7, 8))

	var wg sync.WaitGroup
	errs := make(chan error, 32)
	write := func(off int) {
		p := randBytes(r, chunk)
		copy(model[off:], p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := img.WriteAtContext(ctx, p, int64(off)); err != nil {
				errs <- fmt.Errorf("write at %d: %w", off, err)
			}
		}()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}

	// the first write is held at the OSD; the next eight, each continuing
	// the one before, line up behind it in order
	h.arm()
	t.Cleanup(h.release) // a failure below leaves no write hanging
	write(chunk)
	<-h.held
	for i := 2; i <= 9; i++ {
		write(i * chunk)
		waitFor(fmt.Sprintf("write %d to line up", i), func() bool { return img.merge.heldCount(0) == i-1 })
	}
	// a write elsewhere in the object, and one into another object, go at
	// once
	write(20 * chunk)
	write(4<<20 + chunk)
	waitFor("the two independent writes", func() bool { return len(h.recorded()) == 3 })
	if n := img.merge.heldCount(0); n != 8 {
		t.Errorf("%d writes held, want 8", n)
	}
	h.release()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	obj := func(n uint64) string { return fmt.Sprintf(".%016x", n) }
	got := h.recorded()
	want := []string{
		obj(0) + fmt.Sprintf(" [write %d~%d]", chunk, chunk),
		obj(0) + fmt.Sprintf(" [write %d~%d]", 20*chunk, chunk),
		obj(1) + fmt.Sprintf(" [write %d~%d]", chunk, chunk),
		obj(0) + fmt.Sprintf(" [write %d~%d]", 2*chunk, 8*chunk),
	}
	// the two independent writes went in either order
	if len(got) == 4 && got[1] == want[2] {
		got[1], got[2] = got[2], got[1]
	}
	if !slices.Equal(got, want) {
		t.Errorf("data writes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if g, p := pool.Lent(); g == 0 || g != p {
		t.Errorf("MergeBuffers lent %d buffers and got %d back; want some, all back", g, p)
	}
	checkBothWays(t, img, "rbd/"+name, model)
}

// TestWriteMergerStopsHoldingAlone: while held writes go out alone (a
// sequential writer at queue depth two), writes are no longer held but
// for a probe now and then; a probe that finds company turns holding on
// again.
func TestWriteMergerStopsHoldingAlone(t *testing.T) {
	var m writeMerger
	ctx := context.Background()
	var mu sync.Mutex
	var sent []string
	gates := map[uint64]chan struct{}{}
	send := func(_ context.Context, ds ...dataWrite) error {
		if len(ds) != 1 {
			t.Errorf("%d writes in one op, want 1 (none is acknowledged ahead)", len(ds))
		}
		d := ds[0]
		mu.Lock()
		sent = append(sent, fmt.Sprintf("%d~%d", d.off, len(d.data)))
		g := gates[d.off]
		mu.Unlock()
		if g != nil {
			<-g
		}
		return nil
	}
	const chunk = 4096
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	sentCount := func() int { mu.Lock(); defer mu.Unlock(); return len(sent) }
	// round sends a write at off held at its send, then n writes that
	// continue it one after the other, then releases the first; it
	// returns how many of the n were held.
	round := func(off uint64, n int) int {
		g := make(chan struct{})
		mu.Lock()
		gates[off] = g
		mu.Unlock()
		var wg sync.WaitGroup
		do := func(off uint64) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := dataWrite{data: make([]byte, chunk), off: off}
				if err := m.write(ctx, 0, 0, d, false, send); err != nil {
					t.Error(err)
				}
			}()
		}
		before := sentCount()
		do(off)
		waitFor("the first write's send", func() bool { return sentCount() == before+1 })
		held := 0
		for i := 1; i <= n; i++ {
			do(off + uint64(i*chunk))
			waitFor("the next write to be held or sent", func() bool {
				return m.heldCount(0)+sentCount()-before-1 == i
			})
			held = m.heldCount(0)
		}
		close(g)
		wg.Wait()
		return held
	}
	off := uint64(0)
	next := func(n int) int {
		h := round(off, n)
		off += uint64((n + 1) * chunk)
		return h
	}
	if h := next(1); h != 1 {
		t.Fatalf("first round: %d of 1 held, want 1", h)
	}
	held := 0
	for range probeEvery - 1 {
		held += next(1)
	}
	if held != 0 {
		t.Errorf("after a held write went alone, %d of %d lone followers were held, want 0", held, probeEvery-1)
	}
	// the probe: the next candidate is held, and finds company
	if h := next(8); h != 8 {
		t.Errorf("probe round: %d of 8 held, want 8", h)
	}
	if h := next(4); h != 4 {
		t.Errorf("after the probe found company: %d of 4 held, want 4", h)
	}
}

// TestWriteMergerHoldsBehindWrites: writes the write-around cache
// acknowledged wait behind the newest write in flight into their object
// however they lie in it, and all go once it completes; writes into
// other objects, and writes whose callers wait, go at once; a held write
// whose context ends is dropped with its error.
func TestWriteMergerHoldsBehindWrites(t *testing.T) {
	var m writeMerger
	var mu sync.Mutex
	var sent []string
	gates := map[string]chan struct{}{}
	// a key per op sent: its writes, joined with "+"
	send := func(ctx context.Context, ds ...dataWrite) error {
		var keys []string
		for _, d := range ds {
			keys = append(keys, fmt.Sprintf("%d~%d", d.off, len(d.data)))
		}
		key := strings.Join(keys, "+")
		mu.Lock()
		sent = append(sent, key)
		g := gates[key]
		mu.Unlock()
		if g != nil {
			<-g
		}
		return ctx.Err()
	}
	sentList := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(sent) }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (sent %v)", what, sentList())
			}
		}
	}
	held := func(objno uint64) int {
		m.mu.Lock()
		defer m.mu.Unlock()
		n := 0
		if o := m.objs[objno]; o != nil {
			for _, f := range o.flying {
				n += len(f.behind)
			}
		}
		return n
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	do := func(ctx context.Context, objno, off uint64, behind bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- m.write(ctx, objno, 0, dataWrite{data: make([]byte, 4096), off: off}, behind, send)
		}()
	}
	gate := make(chan struct{})
	mu.Lock()
	gates["0~4096"] = gate
	mu.Unlock()
	ctx := context.Background()
	do(ctx, 0, 0, true)
	waitFor("the first write's send", func() bool { return len(sentList()) == 1 })
	// three acknowledged writes into object 0, none continuing the one in
	// flight, are held behind it
	for i, off := range []uint64{1 << 20, 3 << 20, 2 << 20} {
		do(ctx, 0, off, true)
		waitFor("a held write", func() bool { return held(0) == i+1 })
	}
	// one whose context ends while it is held is dropped
	cctx, cancel := context.WithCancel(ctx)
	do(cctx, 0, 512<<10, true)
	waitFor("the fourth held write", func() bool { return held(0) == 4 })
	cancel()
	waitFor("the cancelled write to leave", func() bool { return held(0) == 3 })
	// an acknowledged write into another object, and a waited-for write
	// into object 0 elsewhere than where the one in flight ends, go at once
	do(ctx, 1, 0, true)
	do(ctx, 0, 8192, false)
	waitFor("the two writes sent at once", func() bool { return len(sentList()) == 3 })
	if n := held(0); n != 3 {
		t.Errorf("%d writes held, want 3", n)
	}
	close(gate)
	wg.Wait()
	close(errs)
	var failed int
	for err := range errs {
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("write: %v", err)
			}
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d writes failed, want the cancelled one", failed)
	}
	// the three held writes go as one op, in offset order
	got := sentList()
	if len(got) != 4 || got[0] != "0~4096" {
		t.Fatalf("sent %v", got)
	}
	if want := "1048576~4096+2097152~4096+3145728~4096"; got[3] != want {
		t.Errorf("released writes sent as %q, want one op %q", got[3], want)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.objs) != 0 {
		t.Errorf("%d objects still tracked", len(m.objs))
	}
}

// TestReleaseHeldGroups: released held writes go in offset order, one
// OSD op per snapshot context, split at maxRide writes and at maxMerge
// bytes; every write is either a lead among the flying writes or rides
// in one lead's op.
func TestReleaseHeldGroups(t *testing.T) {
	var held []*heldWrite
	add := func(seq, off uint64, n int) {
		held = append(held, &heldWrite{d: dataWrite{data: make([]byte, n), off: off},
			f: &flyingWrite{end: off + uint64(n), seq: seq}, release: make(chan struct{})})
	}
	// seq 1: maxRide+2 writes of 4 KiB, given in reverse offset order
	for i := maxRide + 1; i >= 0; i-- {
		add(1, uint64(i)*8192, 4096)
	}
	// seq 2: three writes whose bytes exceed maxMerge after the second
	add(2, 3<<20, maxMerge/2)
	add(2, 0, maxMerge/2)
	add(2, 1<<20, 4096)
	all := slices.Clone(held)
	o := &mergeObject{}
	rode := releaseHeld(o, held)

	var ops [][]string
	for _, f := range o.flying {
		var lead *heldWrite
		for _, hw := range all {
			if hw.f == f {
				lead = hw
			}
		}
		op := []string{fmt.Sprintf("%d:%d", lead.f.seq, lead.d.off)}
		for _, r := range f.riders {
			op = append(op, fmt.Sprintf("%d:%d", lead.f.seq, r.off))
		}
		ops = append(ops, op)
	}
	var want [][]string
	var first []string
	for i := range maxRide {
		first = append(first, fmt.Sprintf("1:%d", i*8192))
	}
	want = append(want, first,
		[]string{fmt.Sprintf("1:%d", maxRide*8192), fmt.Sprintf("1:%d", (maxRide+1)*8192)},
		[]string{"2:0", "2:1048576"}, []string{"2:3145728"})
	if !slices.EqualFunc(ops, want, slices.Equal) {
		t.Errorf("ops %v\nwant %v", ops, want)
	}
	riders := 0
	for _, hw := range all {
		select {
		case <-hw.release:
		default:
			t.Errorf("write at %d not released", hw.d.off)
		}
		if hw.ride != nil {
			riders++
		}
	}
	if riders != rode || riders != len(all)-len(o.flying) {
		t.Errorf("%d riders and %d leads for %d writes", riders, len(o.flying), len(all))
	}
}
