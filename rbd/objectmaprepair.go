package rbd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
	"github.com/purerbd/purerbd/rbd/objectmap"
	"github.com/purerbd/purerbd/rbd/striper"
)

// Checking and rebuilding an object map from the data objects that
// exist, as librbd's ObjectMapIterateRequest, CheckObjectMapRequest and
// RebuildObjectMapRequest do (rbd object-map check, rbd object-map
// rebuild): the state each object should have is read from its snap set
// (list-snaps), so that with fast-diff the head's objects not written
// since the newest snapshot come out clean.

// mapRepairBatch is how many objects are listed between two progress
// reports.
const mapRepairBatch = 256

// CheckObjectMap compares the object map of the open view (the head or
// the snapshot the image was opened at) with the data objects that
// exist, taking the exclusive lock for the head as librbd does. As with
// librbd, an object the map marks as existing that is gone is only an
// inconsistency; any other mismatch (an object that exists but is
// marked nonexistent, clean where it was written) flags the map invalid
// (FlagObjectMapInvalid, and FlagFastDiffInvalid with fast-diff), which
// RebuildObjectMap clears. It returns whether the map was found valid;
// ErrInvalid when the image has no object map.
func (img *Image) CheckObjectMap(ctx context.Context, progress func(done, total uint64)) (valid bool, err error) {
	err = img.mapRepair(ctx, func(ctx context.Context, h *header, guard []cls.Method) error {
		want, err := img.expectedObjectMap(ctx, h, progress)
		if err != nil {
			return err
		}
		have, err := img.loadMapOrAssume(ctx, want.Len())
		if err != nil {
			return err
		}
		valid = true
		for i := uint64(0); i < want.Len(); i++ {
			cur, should := have.Get(i), want.Get(i) // beyond its end: nonexistent
			if cur == should || mismatchTolerated(cur, should) {
				continue
			}
			img.log.Warn("object map error", "object", striper.ObjectName(h.prefix, i),
				"marked", objectmap.StateName(cur), "should_be", objectmap.StateName(should))
			valid = false
		}
		if valid {
			img.installObjectMap(ctx, h)
			return nil
		}
		flags := FlagObjectMapInvalid
		if h.features&FeatureFastDiff != 0 {
			flags |= FlagFastDiffInvalid
		}
		return img.setMapFlags(ctx, guard, flags, flags)
	})
	return valid, err
}

// RebuildObjectMap rewrites the object map of the open view (the head,
// under the exclusive lock, or the snapshot the image was opened at)
// from the data objects that exist and clears its invalid flags, as
// librbd's RebuildObjectMapRequest does. Like librbd it leaves the
// head's objects marked existing that are gone as they are (a write may
// be creating them). ErrInvalid when the image has no object map.
func (img *Image) RebuildObjectMap(ctx context.Context, progress func(done, total uint64)) error {
	return img.mapRepair(ctx, func(ctx context.Context, h *header, guard []cls.Method) error {
		want, err := img.expectedObjectMap(ctx, h, progress)
		if err != nil {
			return err
		}
		have, err := img.loadMapOrAssume(ctx, want.Len())
		if err != nil {
			return err
		}
		if img.snapID == noSnap {
			for i := uint64(0); i < min(want.Len(), have.Len()); i++ {
				if have.Get(i) == objectmap.Exists && want.Get(i) == objectmap.Nonexistent {
					want.Set(i, objectmap.Exists)
				}
			}
		}
		if err := img.saveObjectMap(ctx, want); err != nil {
			return err
		}
		if err := img.setMapFlags(ctx, guard, 0, FlagObjectMapInvalid|FlagFastDiffInvalid); err != nil {
			return err
		}
		if img.snapID == noSnap {
			if om := img.lock.objectMap(); om != nil {
				return om.reload(ctx)
			}
		}
		img.installObjectMap(ctx, img.hdr.Load())
		return nil
	})
}

// loadMapOrAssume loads the open view's object map; a missing one is
// taken as n objects all existing, as librbd's object map refresh
// assumes (so that a rebuild keeps the head's marks where it cannot
// tell).
func (img *Image) loadMapOrAssume(ctx context.Context, n uint64) (*objectmap.BitVector, error) {
	bv, err := img.loadObjectMap(ctx)
	if !errors.Is(err, syscall.ENOENT) {
		return bv, err
	}
	bv = objectmap.New(n)
	for i := range n {
		bv.Set(i, objectmap.Exists)
	}
	return bv, nil
}

// mismatchTolerated reports whether an object marked cur that should be
// should leaves the map valid (librbd's needs_invalidate): a map may
// claim more objects than exist, never fewer.
func mismatchTolerated(cur, should uint8) bool {
	return (cur == objectmap.Exists || cur == objectmap.ExistsClean) &&
		(should == objectmap.Nonexistent || should == objectmap.Pending)
}

// mapRepair runs f on the open view's object map: for the head under the
// exclusive lock (taken even when the map is flagged invalid or does not
// load, which otherwise refuses the lock) with no write in flight, for a
// snapshot directly. guard asserts the lock in header updates.
func (img *Image) mapRepair(ctx context.Context, f func(ctx context.Context, h *header, guard []cls.Method) error) error {
	h, err := img.header(ctx)
	if err != nil {
		return err
	}
	if h.features&FeatureObjectMap == 0 {
		return fmt.Errorf("%w: image %q has no object map", ErrInvalid, img.name)
	}
	if img.snapID != noSnap {
		return f(ctx, h, nil)
	}
	if img.readOnly {
		return ErrReadOnly
	}
	if img.lock == nil {
		return fmt.Errorf("%w: image %q has an object map without exclusive-lock", ErrInvalid, img.name)
	}
	img.lock.mapOptional.Store(true)
	defer img.lock.mapOptional.Store(false)
	return img.exclusive(ctx, func(ctx context.Context, guard []cls.Method) error {
		return f(ctx, img.hdr.Load(), guard)
	})
}

// expectedObjectMap computes the state each object of the open view
// should have from its snap set, as librbd's C_VerifyObjectCallback
// does.
func (img *Image) expectedObjectMap(ctx context.Context, h *header, progress func(done, total uint64)) (*objectmap.BitVector, error) {
	n := h.layout.NumObjects(img.sizeOf(h))
	snaps := slices.Clone(h.snapc.Snaps)
	slices.Sort(snaps)
	fastDiff := h.features&FeatureFastDiff != 0
	bv := objectmap.New(n)
	states := make([]uint8, min(n, mapRepairBatch))
	for start := uint64(0); start < n; start += mapRepairBatch {
		end := min(start+mapRepairBatch, n)
		err := forEach(ctx, int(end-start), func(ctx context.Context, i int) error {
			var err error
			states[i], err = img.objectState(ctx, h, start+uint64(i), snaps, fastDiff)
			return err
		})
		if err != nil {
			return nil, err
		}
		for i := start; i < end; i++ {
			bv.Set(i, states[i-start])
		}
		if progress != nil {
			progress(end, n)
		}
	}
	return bv, nil
}

// objectState is the state object objno should have in the open view's
// map: which clone (or the head) the view reads, and with fast-diff
// whether it was written since the snapshot before the view.
func (img *Image) objectState(ctx context.Context, h *header, objno uint64, snaps []uint64, fastDiff bool) (uint8, error) {
	oid := striper.ObjectName(h.prefix, objno)
	r := rados.NewReadOp()
	st := r.ListSnaps()
	err := img.data.read(ctx, oid, rados.SnapDir, r)
	if err == nil {
		err = st.Err
	}
	if errors.Is(err, rados.ErrNotFound) {
		return objectmap.Nonexistent, nil
	}
	if err != nil {
		return 0, fmt.Errorf("rbd: listing snapshots of %s: %w", oid, err)
	}
	// the first image snapshot at or after id (noSnap if none)
	nextSnap := func(id uint64) uint64 {
		i, _ := slices.BinarySearch(snaps, id)
		if i == len(snaps) {
			return noSnap
		}
		return snaps[i]
	}
	view := img.snapID
	for _, c := range st.SnapSet.Clones {
		var from, to uint64
		if c.CloneID == rados.SnapHead {
			from, to = nextSnap(st.SnapSet.Seq+1), noSnap
		} else {
			if len(c.Snaps) == 0 {
				continue
			}
			from, to = nextSnap(c.Snaps[0]), c.Snaps[len(c.Snaps)-1]
		}
		if to < view {
			continue
		}
		if view < from {
			break
		}
		if fastDiff && from != view {
			return objectmap.ExistsClean, nil
		}
		return objectmap.Exists, nil
	}
	return objectmap.Nonexistent, nil
}

// saveObjectMap writes bv as the open view's object map; the head's
// under the map object's lock, as librbd's object_map_save.
func (img *Image) saveObjectMap(ctx context.Context, bv *objectmap.BitVector) error {
	oid := objectMapObject(img.id, img.snapID)
	w := rados.NewWriteOp()
	if img.snapID == noSnap {
		m := &objectMap{img: img, oid: oid}
		if err := m.lock(ctx); err != nil {
			return err
		}
		w = newWrite(cls.AssertLocked(lockName, cls.LockExclusive, "", ""))
	}
	writeCalls(w, cls.ObjectMapSave(bv))
	if err := img.meta.write(ctx, oid, denc.SnapContext{}, w); err != nil {
		return fmt.Errorf("rbd: saving object map %s: %w", oid, err)
	}
	return nil
}

// setMapFlags sets the open view's flags in mask to flags, and reloads
// the header.
func (img *Image) setMapFlags(ctx context.Context, guard []cls.Method, flags, mask uint64) error {
	w := newWrite(guard...)
	writeCalls(w, cls.SetFlags(img.snapID, flags, mask))
	if err := img.meta.write(ctx, headerObject(img.id), denc.SnapContext{}, w); err != nil {
		return fmt.Errorf("rbd: updating the object map flags of %q: %w", img.name, err)
	}
	if err := img.refresh(ctx); err != nil {
		return err
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// installObjectMap loads the head's object map into the exclusive lock
// after a check or rebuild found it valid, so that writes keep it
// current; a map still invalid stays unloaded (nobody trusts it).
func (img *Image) installObjectMap(ctx context.Context, h *header) {
	if img.snapID != noSnap || img.lock == nil || !img.lock.isOwner() || img.lock.objectMap() != nil ||
		h.flags&FlagObjectMapInvalid != 0 {
		return
	}
	om, err := openObjectMap(ctx, img, h)
	if err != nil {
		img.log.Warn("loading the object map after repair", "err", err)
		return
	}
	img.lock.omap.Store(om)
}
