package rbd

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/purerbd/purerbd/internal/bufpool"
)

// writeMerger merges sequential writes into one data object: a write
// that begins where a write still in flight into the same object ends is
// held back, and the writes that line up behind it are sent together, as
// one OSD write, once that write completes. This is what librbd's simple
// I/O scheduler (rbd_io_scheduler = simple, its default) does: a
// sequential writer at a queue depth above one then costs the OSD one op
// per run of writes instead of one per write, and the OSD, which runs the
// writes of one placement group one at a time, takes them in far fewer
// turns.
//
// Writes the write-around cache has acknowledged (behind) are held
// behind the newest write in flight into their object even when they do
// not continue it, as librbd's scheduler holds every write, and go
// together once that write completes: their callers wait for none of
// it, and an OSD takes the writes into one object together for less
// than it takes them spread among the writes to every other object
// (bench/findings.md, row 26). Where librbd sends each held write as an
// OSD op of its own, they go as the write ops of one OSD op, in offset
// order (up to maxRide writes and maxMerge bytes of one snapshot
// context): one message, one transaction and one PG log entry at the
// OSD instead of one each. The cache admits no write that overlaps one
// in flight, so held writes never overlap and their order is free; the
// OSD applies the op whole or not at all, and a failure is every
// member's, as a merged write's is.
//
// Unlike librbd's scheduler:
//   - a write whose caller waits for it is held only when it continues
//     one in flight or one already held: random writes that happen to
//     share an object with one in flight are sent at once, without
//     waiting a round trip for nothing to merge with;
//   - holding stops while the held writes find no company (a sequential
//     writer at queue depth two: each held write would go alone, a round
//     trip late), and every probeEvery-th candidate is held to notice
//     when they would again;
//   - a held write waits for the write it continues and for nothing else
//     (no timer): if that one is slow at the OSD, so would the held one
//     be.
//
// The writes it holds are copied (their callers may give up waiting and
// reuse their buffers) into buffers of at most maxMerge bytes
// (from OpenOptions.MergeBuffers, or else the image's own bufpool.Pool,
// so that an image that merged a burst of writes keeps no buffers once
// the garbage collector has run twice); the merged write's result is
// every member's.
type writeMerger struct {
	mu   sync.Mutex
	objs map[uint64]*mergeObject
	// company is the moving average of the number of writes per merged
	// write sent; below minCompany, writes are held only to probe
	company float64
	probe   int
	shared  BufferPool   // OpenOptions.MergeBuffers; nil: own
	own     bufpool.Pool // the buffers without a shared pool
	// rode counts the held writes sent in another's OSD op
	rode uint64
}

const (
	// maxMerge bounds a merged write
	maxMerge = 1 << 20
	// minCompany is the least average number of writes per merged write
	// for holding writes to pay
	minCompany = 1.5
	// probeEvery: while holding does not pay, one candidate in this many
	// is held anyway
	probeEvery = 32
	// minMergeBuf is the least buffer a merged write starts with
	minMergeBuf = 64 << 10
)

// mergeObject is the writes in flight into one object that later writes
// may line up behind.
type mergeObject struct {
	flying []*flyingWrite
}

// flyingWrite is a write sent at once, still in flight.
type flyingWrite struct {
	end  uint64 // where it ends in the object
	seq  uint64 // its snapshot context's seq
	next *mergedWrite
	// behind are the acknowledged writes into the object held until
	// this one completes
	behind []*heldWrite
	// riders are released held writes sent in this write's OSD op, and
	// ride their result (nil without riders)
	riders []dataWrite
	ride   *ride
}

// heldWrite is an acknowledged write into an object held behind a write
// in flight into it.
type heldWrite struct {
	d dataWrite
	// f is its entry among the object's flying writes once released
	f *flyingWrite
	// ride, set when released to ride in another held write's OSD op,
	// gets that op's result
	ride    *ride
	release chan struct{} // closed (m.mu held) when f joins them, or ride is set
}

// ride is the result of an OSD op that carries held writes beside its
// own.
type ride struct {
	done chan struct{}
	err  error
}

// maxRide bounds the writes sent in one OSD op.
const maxRide = 64

// mergedWrite is the writes held behind a flying write, merged into one.
type mergedWrite struct {
	off uint64
	buf []byte
	// pooled is buf's buffer as the pool gave it (nil before the first
	// write is added)
	pooled *[]byte
	seq    uint64
	n      int // writes merged
	send   sendFunc
	// ctx is the context of the write that began it, without its
	// cancellation (the others ride on it)
	ctx  context.Context
	sent bool
	done chan struct{}
	err  error
}

// write sends d into object objno through send, or holds it back to be
// merged with the writes that continue it, or (behind: the write-around
// cache acknowledged it) until the newest write in flight into the
// object completes. seq is the snapshot context's seq (only writes of
// one snapshot context merge). Writes that continue each other stay
// inside the object, so only maxMerge bounds a merged write.
func (m *writeMerger) write(ctx context.Context, objno, seq uint64, d dataWrite, behind bool, send sendFunc) error {
	off, data := d.off, d.data
	m.mu.Lock()
	o := m.objs[objno]
	if o != nil {
		if w := o.lineUp(off, seq, len(data)); w != nil {
			w.add(m.buffers(), data)
			w.n++
			m.mu.Unlock()
			return w.wait(ctx)
		}
		if f := o.endingAt(off, seq); f != nil && len(data) < maxMerge && m.hold() {
			w := &mergedWrite{off: off, seq: seq, n: 1, send: send, ctx: context.WithoutCancel(ctx),
				done: make(chan struct{})}
			w.add(m.buffers(), data)
			f.next = w
			m.mu.Unlock()
			return w.wait(ctx)
		}
		if behind && len(o.flying) > 0 {
			last := o.flying[len(o.flying)-1]
			hw := &heldWrite{d: d, f: &flyingWrite{end: off + uint64(len(data)), seq: seq}, release: make(chan struct{})}
			last.behind = append(last.behind, hw)
			m.mu.Unlock()
			f, err := m.awaitRelease(ctx, last, hw)
			if err != nil {
				return err
			}
			if hw.ride != nil {
				// its bytes are in another write's op: wait for that
				// whatever ctx does, as their buffer must outlive it
				<-hw.ride.done
				return hw.ride.err
			}
			return m.fly(ctx, objno, o, f, d, send)
		}
	}
	if o == nil {
		if m.objs == nil {
			m.objs = map[uint64]*mergeObject{}
		}
		o = &mergeObject{}
		m.objs[objno] = o
	}
	f := &flyingWrite{end: off + uint64(len(data)), seq: seq}
	o.flying = append(o.flying, f)
	m.mu.Unlock()
	return m.fly(ctx, objno, o, f, d, send)
}

// awaitRelease waits until hw, held behind last, is released, and
// returns its flying entry, under which it sends its group's op as the
// lead; for a write released to ride in another's op (hw.ride set) the
// entry goes unused, as the caller waits for that op instead. A held
// write whose context ends first is dropped (its write is not sent)
// unless it was released meanwhile.
func (m *writeMerger) awaitRelease(ctx context.Context, last *flyingWrite, hw *heldWrite) (*flyingWrite, error) {
	select {
	case <-hw.release:
		return hw.f, nil
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-hw.release:
		return hw.f, nil
	default:
	}
	last.behind = slices.DeleteFunc(last.behind, func(h *heldWrite) bool { return h == hw })
	return nil, ctx.Err()
}

// sendFunc sends writes into one object as the write ops of one OSD op,
// in the order given.
type sendFunc func(ctx context.Context, ds ...dataWrite) error

// fly sends d, registered as f among o's flying writes, with the writes
// riding in its op, then retires f: the writes held behind it fly next,
// and those merged behind it are sent.
func (m *writeMerger) fly(ctx context.Context, objno uint64, o *mergeObject, f *flyingWrite, d dataWrite, send sendFunc) error {
	var err error
	if len(f.riders) == 0 {
		err = send(ctx, d)
	} else {
		err = send(ctx, append([]dataWrite{d}, f.riders...)...)
		f.ride.err = err
		close(f.ride.done)
	}

	m.mu.Lock()
	o.flying = slices.DeleteFunc(o.flying, func(g *flyingWrite) bool { return g == f })
	m.rode += uint64(releaseHeld(o, f.behind))
	f.behind = nil
	if len(o.flying) == 0 && m.objs[objno] == o {
		delete(m.objs, objno)
	}
	w := f.next
	if w != nil {
		w.sent = true
		m.company += (float64(w.n) - m.company) / 8
	}
	m.mu.Unlock()
	if w != nil {
		go m.sendMerged(w)
	}
	return err
}

// releaseHeld releases writes held behind a write that completed (m.mu
// held): in offset order, each group of up to maxRide writes and maxMerge
// bytes of one snapshot context goes as one OSD op, sent by its first
// write, which joins o's flying writes; the others ride in its op. It
// returns how many rode.
func releaseHeld(o *mergeObject, held []*heldWrite) (rode int) {
	slices.SortFunc(held, func(a, b *heldWrite) int {
		if a.f.seq != b.f.seq {
			return cmp.Compare(a.f.seq, b.f.seq)
		}
		return cmp.Compare(a.d.off, b.d.off)
	})
	var lead *heldWrite
	var bytes int
	for _, hw := range held {
		if lead != nil && hw.f.seq == lead.f.seq && len(lead.f.riders)+1 < maxRide && bytes+len(hw.d.data) <= maxMerge {
			if lead.f.ride == nil {
				lead.f.ride = &ride{done: make(chan struct{})}
			}
			lead.f.riders = append(lead.f.riders, hw.d)
			hw.ride = lead.f.ride
			bytes += len(hw.d.data)
			rode++
			continue
		}
		lead, bytes = hw, len(hw.d.data)
		o.flying = append(o.flying, hw.f)
	}
	// once every op is complete: a lead reads its riders when released
	for _, hw := range held {
		close(hw.release)
	}
	return rode
}

// hold reports whether a write that could be held is (m.mu held).
func (m *writeMerger) hold() bool {
	if m.company == 0 {
		m.company = minCompany
	}
	if m.company >= minCompany {
		return true
	}
	m.probe++
	return m.probe%probeEvery == 0
}

// lineUp returns the held write that data at off continues, if it has
// room for n more bytes.
func (o *mergeObject) lineUp(off, seq uint64, n int) *mergedWrite {
	for _, f := range o.flying {
		w := f.next
		if w != nil && !w.sent && w.seq == seq && w.off+uint64(len(w.buf)) == off && len(w.buf)+n <= maxMerge {
			return w
		}
	}
	return nil
}

// endingAt returns the flying write that ends at off with nothing held
// behind it yet.
func (o *mergeObject) endingAt(off, seq uint64) *flyingWrite {
	for _, f := range o.flying {
		if f.end == off && f.seq == seq && f.next == nil {
			return f
		}
	}
	return nil
}

// buffers is the pool merged writes take their buffers from.
func (m *writeMerger) buffers() BufferPool {
	if m.shared != nil {
		return m.shared
	}
	return &m.own
}

// add appends data to w's bytes, moving them to a larger buffer from
// pool when they do not fit: a buffer starts at a few times the first
// write's size, so that two merged 4 KiB writes do not take a MiB.
func (w *mergedWrite) add(pool BufferPool, data []byte) {
	n := len(w.buf) + len(data)
	if n > cap(w.buf) {
		grown := pool.Get(min(maxMerge, max(n, 2*cap(w.buf), 8*len(data), minMergeBuf)))
		copy(*grown, w.buf)
		pool.Put(w.pooled)
		w.pooled, w.buf = grown, (*grown)[:len(w.buf):cap(*grown)]
	}
	w.buf = append(w.buf, data...)
}

// sendMerged sends w and answers its writes.
func (m *writeMerger) sendMerged(w *mergedWrite) {
	w.err = w.send(w.ctx, dataWrite{data: w.buf, off: w.off})
	close(w.done)
	m.buffers().Put(w.pooled)
}

// wait returns w's result once it is sent and answered. A caller whose
// context ends first gets its error; its bytes may still land, as those
// of a write abandoned in flight may.
func (w *mergedWrite) wait(ctx context.Context) error {
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
