package rbd

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd/internal/cls"
	"github.com/purerbd/purerbd/rbd/objectmap"
	"github.com/purerbd/purerbd/rbd/striper"
)

// Allocation (block status): which byte ranges of an image are backed by
// data objects and which are holes that read as zeroes, as `rbd diff`
// reports them, for NBD's base:allocation context and sparse copies.

// Bounds on the objects one AllocatedExtents call looks at: the object
// map answers from memory (or one read), stat costs a round trip per
// object.
const (
	maxMapObjectsPerCall  = 4096
	maxStatObjectsPerCall = 256
)

// AllocatedExtents reports the allocation of [off, off+length), clipped to
// the image size, by calling fn for consecutive extents in image order:
// allocated ones may hold data; the others are holes that read as zeroes.
// It may stop before off+length (at least one byte is reported when the
// range is inside the image); call again from where it stopped. An error
// from fn stops the walk and is returned.
//
// Package nbd/rbdnbd turns it into NBD block status (holes become
// NBD_STATE_HOLE|NBD_STATE_ZERO).
//
// Where the answer comes from:
//
//   - with the object-map feature and a map not flagged invalid, from the
//     object map (in memory while this client holds the exclusive lock,
//     else one read of the map object): a nonexistent object is a hole,
//     any other state makes the whole object allocated (what `rbd diff
//     --whole-object` reports);
//   - otherwise from each object's stat, a few at a time: bytes up to the
//     object's size are allocated, beyond it and in missing objects are
//     holes (what `rbd diff` reports).
//
// For a clone, a hole within the parent overlap reads the parent's data
// and is reported as allocated.
func (img *Image) AllocatedExtents(ctx context.Context, off, length int64, fn func(off, length int64, allocated bool) error) error {
	if off < 0 || length < 0 {
		return fmt.Errorf("%w: negative range", ErrInvalid)
	}
	h, err := img.header(ctx)
	if err != nil {
		return err
	}
	var om *objectMap
	if img.snapID == noSnap && img.lock != nil {
		// while this client owns the lock, its map in memory is current;
		// keep the lock from being released until the map was consulted
		img.ioGate.RLock()
		if img.lock.isOwner() {
			om = img.lock.objectMap()
			defer img.ioGate.RUnlock()
		} else {
			img.ioGate.RUnlock()
		}
		h = img.hdr.Load()
	}
	size := img.sizeOf(h)
	if length == 0 || uint64(off) >= size {
		return nil
	}
	n := min(uint64(length), size-uint64(off))
	objSize := h.layout.ObjectSize

	var state func(objno uint64) uint8
	if om != nil {
		state = om.get
	} else if img.objectMapValid(h) {
		bv, err := img.loadObjectMap(ctx)
		if err != nil {
			img.log.Warn("object map unreadable, stat-ing objects instead", "err", err)
		} else if bv.Len() >= h.layout.NumObjects(size) {
			state = bv.Get
		}
	}

	var (
		exts     []striper.ObjectExtent
		allocEnd func(i int) uint64 // bytes of extent i's object that hold data
	)
	if state != nil {
		n = min(n, maxMapObjectsPerCall*objSize)
		exts = h.layout.MapExtents(uint64(off), n)
		allocEnd = func(i int) uint64 {
			if state(exts[i].ObjectNo) == objectmap.Nonexistent {
				return 0
			}
			return objSize
		}
	} else {
		n = min(n, maxStatObjectsPerCall*objSize)
		exts = h.layout.MapExtents(uint64(off), n)
		ends := make([]uint64, len(exts))
		err := forEach(ctx, len(exts), func(ctx context.Context, i int) error {
			var err error
			ends[i], err = img.objectDataEnd(ctx, h, exts[i].ObjectNo)
			return err
		})
		if err != nil {
			return err
		}
		allocEnd = func(i int) uint64 { return ends[i] }
	}
	var overlap uint64
	if h.parent != nil && img.parent != nil {
		overlap = img.parentOverlap(h)
	}
	return emitExtents(allocations(exts, uint64(off), overlap, allocEnd), fn)
}

// objectMapValid reports whether the open view's object map may be
// trusted.
func (img *Image) objectMapValid(h *header) bool {
	if h.features&FeatureObjectMap == 0 {
		return false
	}
	if img.snapID == noSnap {
		return h.flags&FlagObjectMapInvalid == 0
	}
	s, ok := h.snapByID(img.snapID)
	return ok && s.Flags&FlagObjectMapInvalid == 0
}

// loadObjectMap reads the open view's object map from the cluster.
func (img *Image) loadObjectMap(ctx context.Context) (*objectmap.BitVector, error) {
	return img.loadObjectMapAt(ctx, img.snapID)
}

// loadObjectMapAt reads the object map of snapshot id (noSnap: the
// head's) from the cluster.
func (img *Image) loadObjectMapAt(ctx context.Context, id uint64) (*objectmap.BitVector, error) {
	oid := objectMapObject(img.id, id)
	out, err := call(ctx, img.meta, oid, cls.ObjectMapLoad())
	if err != nil {
		return nil, fmt.Errorf("rbd: loading object map %s: %w", oid, err)
	}
	bv, err := cls.DecodeObjectMapLoad(out)
	if err != nil {
		return nil, fmt.Errorf("rbd: object map %s: %w", oid, err)
	}
	return bv, nil
}

// objectDataEnd returns the size of data object objno in the open view,
// 0 when it does not exist.
func (img *Image) objectDataEnd(ctx context.Context, h *header, objno uint64) (uint64, error) {
	oid := striper.ObjectName(h.prefix, objno)
	r := rados.NewReadOp()
	st := r.Stat()
	err := img.data.read(ctx, oid, img.snapID, r)
	if errors.Is(err, syscall.ENOENT) {
		return 0, nil
	}
	if err == nil {
		err = st.Err
	}
	if err != nil {
		return 0, fmt.Errorf("rbd: stat of %s: %w", oid, err)
	}
	return st.Size, nil
}

// allocation is one piece of the image range with its status.
type allocation struct {
	off, length uint64
	allocated   bool
}

// allocations turns object extents (of a range starting at image offset
// base) into image-ordered pieces: bytes of extent i below allocEnd(i)
// within its object are allocated, the rest are holes unless they lie
// below the parent overlap (clones read those from the parent).
func allocations(exts []striper.ObjectExtent, base, overlap uint64, allocEnd func(i int) uint64) []allocation {
	var out []allocation
	add := func(off, length uint64, allocated bool) {
		if length == 0 {
			return
		}
		if !allocated && off < overlap {
			n := min(length, overlap-off)
			out = append(out, allocation{off, n, true})
			off, length = off+n, length-n
			if length == 0 {
				return
			}
		}
		out = append(out, allocation{off, length, allocated})
	}
	for i, x := range exts {
		end := allocEnd(i)
		objOff := x.Offset
		for _, b := range x.Buffer {
			imgOff := base + b.Offset
			data := uint64(0)
			if objOff < end {
				data = min(b.Length, end-objOff)
			}
			add(imgOff, data, true)
			add(imgOff+data, b.Length-data, false)
			objOff += b.Length
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].off < out[j].off })
	return out
}

// emitExtents merges adjacent pieces of equal status and hands them to fn.
func emitExtents(pieces []allocation, fn func(off, length int64, allocated bool) error) error {
	for i := 0; i < len(pieces); {
		cur := pieces[i]
		for i++; i < len(pieces) && pieces[i].allocated == cur.allocated && pieces[i].off == cur.off+cur.length; i++ {
			cur.length += pieces[i].length
		}
		if err := fn(int64(cur.off), int64(cur.length), cur.allocated); err != nil {
			return err
		}
	}
	return nil
}
