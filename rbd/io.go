package rbd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd/objectmap"
	"github.com/purerbd/purerbd/rbd/striper"
)

// Image I/O: byte ranges are cut into per-object extents (Ceph's
// striping), which are read or written in parallel.

// maxObjectsInFlight bounds the object requests one image request keeps
// in flight.
const maxObjectsInFlight = 32

// forEach runs f for 0..n-1 with bounded parallelism and returns the
// first error (cancelling the others).
func forEach(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	if n == 1 {
		return f(ctx, 0)
	}
	return forEachParallel(ctx, n, f)
}

// forEachParallel is forEach for more than one: apart, so that the
// variables its goroutines share are not allocated for a lone call.
func forEachParallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		once sync.Once
		ferr error
	)
	sem := make(chan struct{}, maxObjectsInFlight)
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			if err := f(ctx, i); err != nil {
				once.Do(func() { ferr = err; cancel() })
			}
		}(i)
	}
	wg.Wait()
	if ferr == nil && ctx.Err() != nil {
		ferr = ctx.Err()
	}
	return ferr
}

// objectLocks orders operations on one data object. Data writes that
// leave the object existing (writes, zeroing, truncation) hold it shared,
// so that any number of them are in flight into one object at a time, as
// librbd sends them (the OSD orders them). Object map transitions, copy-up
// and removal hold it exclusively: a data write is sent only once the map
// says the object exists, a clone's object is copied up once with the
// writes racing it waiting, and no write slips in between a removal and
// the map's NONEXISTENT. Operations on different objects do not wait for
// each other.
type objectLocks struct {
	mu sync.Mutex
	m  map[uint64]*objectLockEntry
}

type objectLockEntry struct {
	mu   sync.RWMutex
	refs int
}

// entry returns object n's entry, referenced; release drops the
// reference.
func (t *objectLocks) entry(n uint64) *objectLockEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[uint64]*objectLockEntry{}
	}
	e := t.m[n]
	if e == nil {
		e = &objectLockEntry{}
		t.m[n] = e
	}
	e.refs++
	return e
}

func (t *objectLocks) release(n uint64, e *objectLockEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(t.m, n)
	}
}

// objectHold is an object's lock held; unlock releases it. A value, not
// a closure, so that taking a lock for a write allocates nothing.
type objectHold struct {
	t      *objectLocks
	n      uint64
	e      *objectLockEntry
	shared bool
}

// unlock releases the lock.
func (h objectHold) unlock() {
	if h.shared {
		h.e.mu.RUnlock()
	} else {
		h.e.mu.Unlock()
	}
	h.t.release(h.n, h.e)
}

// lock takes object n's lock exclusively.
func (t *objectLocks) lock(n uint64) objectHold {
	e := t.entry(n)
	e.mu.Lock()
	return objectHold{t: t, n: n, e: e}
}

// rlock takes object n's lock shared.
func (t *objectLocks) rlock(n uint64) objectHold {
	e := t.entry(n)
	e.mu.RLock()
	return objectHold{t: t, n: n, e: e, shared: true}
}

// errNeedExclusive is returned by an objectWrite send run under the
// shared lock to have it run again under the exclusive one (a clone's
// object that needs copying up).
var errNeedExclusive = errors.New("rbd: object operation needs the exclusive object lock")

// objectWrite runs send, a data operation that leaves object objno
// existing, once the object map (if any) says the object exists: under
// the object's shared lock when it does already, else under the exclusive
// lock after moving the map to EXISTS (librbd's order: map first, then
// data). With skipMissing, an object the map says does not exist is left
// alone (zeroing a hole). send is told whether it holds the lock
// exclusively; under the shared lock it may return errNeedExclusive to be
// run again under the exclusive one.
func (img *Image) objectWrite(ctx context.Context, om *objectMap, objno uint64, skipMissing bool, send func(ctx context.Context, exclusive bool) error) error {
	held := img.objLocks.rlock(objno)
	state := objectmap.Exists
	if om != nil {
		state = om.get(objno)
	}
	if state == objectmap.Nonexistent && skipMissing {
		held.unlock()
		return nil
	}
	if state == objectmap.Exists {
		err := send(ctx, false)
		held.unlock()
		if !errors.Is(err, errNeedExclusive) {
			return err
		}
	} else {
		held.unlock()
	}
	held = img.objLocks.lock(objno)
	defer held.unlock()
	if om != nil {
		if skipMissing && om.get(objno) == objectmap.Nonexistent {
			return nil
		}
		if err := om.ensure(ctx, objno, objectmap.Exists); err != nil {
			return err
		}
	}
	return send(ctx, true)
}

// gather returns the bytes of p that extent x covers, contiguous.
func gather(p []byte, x striper.ObjectExtent) []byte {
	if len(x.Buffer) == 1 {
		b := x.Buffer[0]
		return p[b.Offset : b.Offset+b.Length]
	}
	buf := make([]byte, 0, x.Length)
	for _, b := range x.Buffer {
		buf = append(buf, p[b.Offset:b.Offset+b.Length]...)
	}
	return buf
}

// scatter copies data (object bytes from x.Offset) into p's pieces and
// zero-fills what data does not cover.
func scatter(p []byte, x striper.ObjectExtent, data []byte) {
	for _, b := range x.Buffer {
		dst := p[b.Offset : b.Offset+b.Length]
		n := copy(dst, data)
		clear(dst[n:])
		data = data[n:]
	}
}

// beginWrite waits until this client may write (taking the exclusive
// lock if the image has one) and returns the header and object map to
// use; endWrite must be called when the write finished.
func (img *Image) beginWrite(ctx context.Context) (h *header, om *objectMap, err error) {
	if img.readOnly {
		return nil, nil, ErrReadOnly
	}
	for {
		if _, err := img.header(ctx); err != nil {
			return nil, nil, err
		}
		img.ioGate.RLock()
		if img.lock == nil || img.lock.isOwner() {
			if img.lock != nil {
				om = img.lock.objectMap()
			}
			return img.hdr.Load(), om, nil
		}
		img.ioGate.RUnlock()
		if err := img.lock.acquire(ctx); err != nil {
			return nil, nil, err
		}
	}
}

// endWrite ends a write begun by beginWrite.
func (img *Image) endWrite() { img.ioGate.RUnlock() }

// ReadAt implements io.ReaderAt.
func (img *Image) ReadAt(p []byte, off int64) (int, error) {
	return img.ReadAtContext(context.Background(), p, off)
}

// WriteAt implements io.WriterAt.
func (img *Image) WriteAt(p []byte, off int64) (int, error) {
	return img.WriteAtContext(context.Background(), p, off)
}

// ReadAtContext reads len(p) bytes at off. Ranges never written read as
// zeros (or as the parent's data, for clones). At the end of the image it
// returns fewer bytes and io.EOF.
func (img *Image) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset", ErrInvalid)
	}
	if err := img.throttle(ctx, false, int64(len(p))); err != nil {
		return 0, err
	}
	h, err := img.header(ctx)
	if err != nil {
		return 0, err
	}
	var om *objectMap
	if img.snapID == noSnap && img.lock != nil {
		img.ioGate.RLock()
		defer img.ioGate.RUnlock()
		if img.lock.isOwner() {
			om = img.lock.objectMap()
		}
		h = img.hdr.Load()
	}
	size := img.sizeOf(h)
	if uint64(off) >= size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := min(uint64(len(p)), size-uint64(off))
	if err := img.wa.settle(ctx, byteRange{uint64(off), uint64(off) + n}); err != nil {
		return 0, err
	}
	if err := img.readExtents(ctx, h, om, h.layout.MapExtents(uint64(off), n), uint64(off), p); err != nil {
		return 0, err
	}
	if n < uint64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// readExtents reads the extents of p (at image offset base), object by
// object, in parallel. A single extent is read with no closure, which
// would be allocated for the goroutines of several.
func (img *Image) readExtents(ctx context.Context, h *header, om *objectMap, exts []striper.ObjectExtent, base uint64, p []byte) error {
	if len(exts) == 1 {
		return img.readObject(ctx, h, om, exts[0], base, p)
	}
	return forEach(ctx, len(exts), func(ctx context.Context, i int) error {
		return img.readObject(ctx, h, om, exts[i], base, p)
	})
}

func (img *Image) readObject(ctx context.Context, h *header, om *objectMap, x striper.ObjectExtent, base uint64, p []byte) error {
	if om != nil && h.parent == nil && om.get(x.ObjectNo) == objectmap.Nonexistent {
		scatter(p, x, nil)
		return nil
	}
	oid := striper.ObjectName(h.prefix, x.ObjectNo)
	r := rados.NewReadOp()
	var (
		s   *rados.ReadStep
		dst []byte
	)
	if len(x.Buffer) == 1 && x.Buffer[0].Length == x.Length {
		// the extent is one piece of p (always so without fancy
		// striping): the data is received straight into it
		b := x.Buffer[0]
		dst = p[b.Offset : b.Offset+b.Length]
		s = r.ReadInto(dst, x.Offset)
	} else {
		s = r.Read(x.Offset, x.Length)
	}
	err := img.data.read(ctx, oid, img.snapID, r)
	if errors.Is(err, syscall.ENOENT) {
		if h.parent != nil && img.parent != nil {
			return img.readFromParent(ctx, h, x, base, p)
		}
		scatter(p, x, nil)
		return nil
	}
	if err != nil {
		return fmt.Errorf("rbd: reading %s: %w", oid, err)
	}
	if dst != nil {
		// the object's bytes are dst's prefix; an object shorter than
		// the read reads as zeros beyond its end
		clear(dst[len(s.Data):])
		return nil
	}
	scatter(p, x, s.Data)
	return nil
}

// WriteAtContext writes p at off. Writes past the end of the image fail
// with ErrOutOfRange (resize first). With the write-around cache on, it
// returns once the write is on its way (p may be reused at once); Flush
// reports whether it landed.
func (img *Image) WriteAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	return img.writeAt(ctx, p, nil, off)
}

// WriteFrozenAt writes f's bytes at off, as WriteAtContext does, with
// what librbd saves on a buffer it is handed again and again (`rbd
// bench` writes one buffer throughout): the crc32c of each piece sent
// is computed once for f and reused, and the write-around cache
// acknowledges the write early without copying it, as f cannot change.
func (img *Image) WriteFrozenAt(ctx context.Context, f *rados.Frozen, off int64) (int, error) {
	return img.writeAt(ctx, f.Bytes(), f, off)
}

// writeAt writes p at off; fz, when not nil, is p frozen.
func (img *Image) writeAt(ctx context.Context, p []byte, fz *rados.Frozen, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset", ErrInvalid)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := img.throttle(ctx, true, int64(len(p))); err != nil {
		return 0, err
	}
	h, om, err := img.beginWrite(ctx)
	if err != nil {
		return 0, err
	}
	if uint64(off)+uint64(len(p)) > h.size {
		img.endWrite()
		return 0, fmt.Errorf("%w: write of %d bytes at %d, image size %d", ErrOutOfRange, len(p), off, h.size)
	}
	if img.wa.active() {
		seq, early, err := img.wa.admit(ctx, byteRange{uint64(off), uint64(off) + uint64(len(p))}, fz == nil)
		if err != nil {
			img.endWrite()
			return 0, err
		}
		if early {
			// the caller may reuse p once this returns, unless frozen
			buf := p
			if fz == nil {
				buf = img.wa.bufs.get(len(p))
				copy(buf, p)
			}
			img.wa.workers.run(func() {
				err := img.writeExtents(img.wa.bg, h, om, buf, fz, off, true)
				img.endWrite()
				img.wa.complete(seq, err)
				if fz == nil {
					img.wa.bufs.put(buf)
				}
			})
			return len(p), nil
		}
	}
	defer img.endWrite()
	if err := img.writeExtents(ctx, h, om, p, fz, off, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeExtents writes p at off, object by object, in parallel; fz, when
// not nil, is p frozen; behind says the write-around cache acknowledged
// the write (see writeMerger).
func (img *Image) writeExtents(ctx context.Context, h *header, om *objectMap, p []byte, fz *rados.Frozen, off int64, behind bool) error {
	exts := h.layout.MapExtents(uint64(off), uint64(len(p)))
	if len(exts) == 1 {
		return img.writeObject(ctx, h, om, exts[0], p, fz, behind)
	}
	return forEach(ctx, len(exts), func(ctx context.Context, i int) error {
		return img.writeObject(ctx, h, om, exts[i], p, fz, behind)
	})
}

func (img *Image) writeObject(ctx context.Context, h *header, om *objectMap, x striper.ObjectExtent, p []byte, fz *rados.Frozen, behind bool) error {
	d := dataWrite{data: gather(p, x), off: x.Offset, full: x.Offset == 0 && x.Length == h.layout.ObjectSize}
	if fz != nil && len(x.Buffer) == 1 {
		// one contiguous piece of the frozen buffer: its crc is cached
		d.crc, d.crcKnown = fz.Checksum(int(x.Buffer[0].Offset), int(x.Buffer[0].Length)), true
	}
	oid := striper.ObjectName(h.prefix, x.ObjectNo)
	if h.parent != nil && img.parent != nil && img.hasParentData(h, x.ObjectNo) {
		return img.writeClone(ctx, om, h, x.ObjectNo, oid, d.add)
	}
	send := func(ctx context.Context, ds ...dataWrite) error {
		w := rados.NewWriteOp()
		for i := range ds {
			ds[i].add(w)
		}
		if err := img.data.write(ctx, oid, h.snapc, w); err != nil {
			return fmt.Errorf("rbd: writing %s: %w", oid, err)
		}
		return nil
	}
	return img.objectWrite(ctx, om, x.ObjectNo, false, func(ctx context.Context, exclusive bool) error {
		// a write under the exclusive lock has nothing in flight beside
		// it to merge with; a whole-object write has nothing to merge
		if exclusive || d.full || img.opts.NoWriteMerge {
			return send(ctx, d)
		}
		return img.merge.write(ctx, x.ObjectNo, h.snapc.Seq, d, behind, send)
	})
}

// dataWrite is the write of data at off into one data object.
type dataWrite struct {
	data []byte
	off  uint64
	// full: the write covers the whole object
	full bool
	// crc, when crcKnown, is data's crc32c (from a rados.Frozen)
	crc      uint32
	crcKnown bool
}

// add adds the write to w. A write covering the whole object replaces
// it (WRITEFULL), librbd's rule, which spares the OSD an overwrite in
// place.
func (d *dataWrite) add(w *rados.WriteOp) {
	switch {
	case d.full && d.crcKnown:
		w.WriteFullWithCRC(d.data, d.crc)
	case d.full:
		w.WriteFull(d.data)
	case d.crcKnown:
		w.WriteWithCRC(d.data, d.off, d.crc)
	default:
		w.Write(d.data, d.off)
	}
}

// Flush returns once every write acknowledged so far is stable. Without
// the write-around cache there is nothing to wait for (the OSDs
// acknowledge a write only once durable); with it, Flush waits for the
// writes the cache acknowledged and returns an *ErrWriteBehind for the
// first of them that failed since the last Flush.
func (img *Image) Flush(ctx context.Context) error {
	if img.closed.Load() {
		return ErrClosed
	}
	return img.wa.flush(ctx)
}

// Discard deallocates [off, off+length): whole objects are removed, the
// tail of an object truncated, other ranges zeroed, as librbd does. The
// range reads as zeros afterwards.
func (img *Image) Discard(ctx context.Context, off, length int64) error {
	if off < 0 || length < 0 {
		return fmt.Errorf("%w: negative range", ErrInvalid)
	}
	if length == 0 {
		return nil
	}
	if err := img.throttle(ctx, true, length); err != nil {
		return err
	}
	h, om, err := img.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer img.endWrite()
	if uint64(off) >= h.size {
		return nil
	}
	n := min(uint64(length), h.size-uint64(off))
	if err := img.wa.settle(ctx, byteRange{uint64(off), uint64(off) + n}); err != nil {
		return err
	}
	exts := h.layout.MapExtents(uint64(off), n)
	return forEach(ctx, len(exts), func(ctx context.Context, i int) error {
		return img.discardObject(ctx, h, om, exts[i])
	})
}

// WriteZeroes makes [off, off+length) read as zeros, deallocating where
// it can (the same object operations as Discard).
func (img *Image) WriteZeroes(ctx context.Context, off, length int64) error {
	return img.Discard(ctx, off, length)
}

func (img *Image) discardObject(ctx context.Context, h *header, om *objectMap, x striper.ObjectExtent) error {
	oid := striper.ObjectName(h.prefix, x.ObjectNo)
	if h.parent != nil && img.parent != nil && img.hasParentData(h, x.ObjectNo) {
		return img.zeroClone(ctx, h, om, x, oid)
	}
	return img.discardPlain(ctx, h, om, x, oid)
}

// discardPlain discards a range of an object that has no parent data.
func (img *Image) discardPlain(ctx context.Context, h *header, om *objectMap, x striper.ObjectExtent, oid string) error {
	n := x.ObjectNo
	objSize := h.layout.ObjectSize
	if x.Offset == 0 && x.Length == objSize {
		return img.removeObject(ctx, h, om, n, oid)
	}
	op, what := zeroOf(x, objSize)
	return img.objectWrite(ctx, om, n, true, func(ctx context.Context, _ bool) error {
		w := rados.NewWriteOp()
		op(w)
		if err := img.data.write(ctx, oid, h.snapc, w); err != nil {
			return fmt.Errorf("rbd: %s %s: %w", what, oid, err)
		}
		return nil
	})
}

// zeroOf returns the operation that makes extent x of an object of
// objSize bytes read as zeros, as librbd discards: a truncate when the
// extent reaches the object's end, else a zero; and what it is doing.
func zeroOf(x striper.ObjectExtent, objSize uint64) (op func(w *rados.WriteOp), what string) {
	if x.Offset+x.Length == objSize {
		return func(w *rados.WriteOp) { w.Truncate(x.Offset) }, "truncating"
	}
	return func(w *rados.WriteOp) { w.Zero(x.Offset, x.Length) }, "zeroing"
}

// removeObject removes data object n: map to PENDING, remove, map to
// NONEXISTENT, all under the object's exclusive lock.
func (img *Image) removeObject(ctx context.Context, h *header, om *objectMap, n uint64, oid string) error {
	held := img.objLocks.lock(n)
	defer held.unlock()
	if om != nil && om.get(n) == objectmap.Nonexistent {
		return nil
	}
	pending := objectmap.Pending
	if om != nil {
		if err := om.update(ctx, n, n+1, objectmap.Pending, nil); err != nil {
			return err
		}
	}
	err := deleteObject(ctx, img.data, oid, h.snapc)
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("rbd: removing %s: %w", oid, err)
	}
	if om != nil {
		return om.update(ctx, n, n+1, objectmap.Nonexistent, &pending)
	}
	return nil
}
