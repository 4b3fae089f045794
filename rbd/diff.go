package rbd

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd/objectmap"
	"github.com/purerbd/purerbd/rbd/striper"
)

// Diffs between two points of an image's history, as librbd's
// diff_iterate computes them (`rbd diff`, `rbd export-diff`, `rbd du`):
// from each data object's clone list (list-snaps), or, for a
// whole-object diff of an image with fast-diff, from the object maps of
// the snapshots between the two points.

// DiffOptions selects what Diff compares.
type DiffOptions struct {
	// FromSnap is the snapshot to diff from; empty diffs from the
	// image's creation.
	FromSnap string
	// WholeObject reports every object that changed whole, not the
	// changed bytes in it (cheaper: fast-diff answers it from the
	// object maps).
	WholeObject bool
	// IncludeParent reports, for a clone diffed from its creation, what
	// it reads from its parent too.
	IncludeParent bool
}

// Diff reports the changes between opts.FromSnap (or the image's
// creation) and the open view (the head or the snapshot the image was
// opened at) within [off, off+length) by calling fn for each changed
// extent in image order: exists is false where the data was removed
// (reads as zeroes). It fails with ErrNotFound when FromSnap does not
// exist and ErrInvalid when it is newer than the open view.
func (img *Image) Diff(ctx context.Context, off, length int64, opts DiffOptions, fn func(off, length int64, exists bool) error) error {
	if off < 0 || length < 0 {
		return fmt.Errorf("%w: negative range", ErrInvalid)
	}
	h, err := img.header(ctx)
	if err != nil {
		return err
	}
	var from uint64
	if opts.FromSnap != "" {
		s, ok := h.snapByName(opts.FromSnap)
		if !ok {
			return fmt.Errorf("%w: snapshot %q of %s", ErrNotFound, opts.FromSnap, img.name)
		}
		from = s.ID
	}
	return img.diff(ctx, h, from, uint64(off), uint64(length), opts, fn)
}

// diff is Diff from snapshot id from (0: the image's creation).
func (img *Image) diff(ctx context.Context, h *header, from, off, length uint64, opts DiffOptions,
	fn func(off, length int64, exists bool) error) error {
	end := img.snapID
	if from == end {
		return nil
	}
	if from > end {
		return fmt.Errorf("%w: snapshot %d is not older than %d", ErrInvalid, from, end)
	}
	size := img.sizeOf(h)
	if off >= size {
		return nil
	}
	length = min(length, size-off)

	if opts.WholeObject && h.features&FeatureFastDiff != 0 {
		state, err := img.diffObjectMaps(ctx, h, from, end)
		if err == nil {
			return emitObjectDiff(h, state, off, length, fn)
		}
		img.log.Info("fast diff unavailable, listing snapshots of objects instead", "err", err)
	}

	var parentDiff intervals
	if opts.IncludeParent && from == 0 && h.parent != nil && img.parent != nil {
		if overlap := img.parentOverlap(h); overlap > 0 {
			ph, err := img.parent.header(ctx)
			if err != nil {
				return err
			}
			err = img.parent.diff(ctx, ph, 0, 0, overlap, opts, func(off, length int64, exists bool) error {
				// a discard in the parent reads as zeroes: not data
				if exists {
					parentDiff.insert(uint64(off), uint64(length))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}

	d := &snapDiff{img: img, h: h, from: from, end: end, whole: opts.WholeObject, parent: parentDiff}
	// a batch of objects at a time: their snap sets are listed in
	// parallel; as librbd does, the extents of each stripe period (one
	// object without fancy striping) are reported in image order,
	// adjacent ones of the same kind merged
	const batch = 64
	objs := groupByObject(h.layout.MapExtents(off, length))
	period := func(i int) uint64 { return objs[i][0].ObjectNo / h.layout.StripeCount }
	for len(objs) > 0 {
		n := min(batch, len(objs))
		for n < len(objs) && period(n) == period(n-1) {
			n++
		}
		results := make([][]allocation, n)
		err := forEach(ctx, n, func(ctx context.Context, i int) error {
			var err error
			results[i], err = d.object(ctx, objs[i], off)
			return err
		})
		if err != nil {
			return err
		}
		for i := 0; i < n; {
			j := i + 1
			for j < n && period(j) == period(i) {
				j++
			}
			var pieces []allocation
			for _, r := range results[i:j] {
				pieces = append(pieces, r...)
			}
			sort.Slice(pieces, func(a, b int) bool { return pieces[a].off < pieces[b].off })
			if err := emitExtents(pieces, fn); err != nil {
				return err
			}
			i = j
		}
		objs = objs[n:]
	}
	return nil
}

// groupByObject splits extents (sorted by object) into one slice per
// object.
func groupByObject(exts []striper.ObjectExtent) [][]striper.ObjectExtent {
	var out [][]striper.ObjectExtent
	for i := 0; i < len(exts); {
		j := i + 1
		for j < len(exts) && exts[j].ObjectNo == exts[i].ObjectNo {
			j++
		}
		out = append(out, exts[i:j])
		i = j
	}
	return out
}

// snapDiff is one list-snaps diff between snapshot ids from and end.
type snapDiff struct {
	img       *Image
	h         *header
	from, end uint64
	whole     bool
	parent    intervals // data the clone reads from its parent (from == 0)
}

// object computes the changed extents of one object (its extents of the
// range starting at image offset base) as librbd's list-snaps request
// does for diff_iterate: the data that changed between the two
// snapshots, and (diffing from a snapshot) the ranges that were
// removed or truncated away. An allocation's allocated field says
// whether it is data.
func (d *snapDiff) object(ctx context.Context, exts []striper.ObjectExtent, base uint64) ([]allocation, error) {
	oid := striper.ObjectName(d.h.prefix, exts[0].ObjectNo)
	r := rados.NewReadOp()
	st := r.ListSnaps()
	err := d.img.data.read(ctx, oid, rados.SnapDir, r)
	if err == nil {
		err = st.Err
	}
	if errors.Is(err, rados.ErrNotFound) {
		return d.parentOverlap(exts, base), nil
	}
	if err != nil {
		return nil, fmt.Errorf("rbd: listing snapshots of %s: %w", oid, err)
	}
	var objIval intervals
	for _, x := range exts {
		objIval.insert(x.Offset, x.Length)
	}
	objSize := d.h.layout.ObjectSize
	var data, zero intervals
	var start, prevEndSize uint64
	for _, end := range []uint64{d.from, d.end} {
		if start == end {
			continue
		}
		diff, endSize, exists, whole := calcSnapSetDiff(st.SnapSet, start, end)
		if whole {
			diff, exists, endSize = intervals{{0, objSize}}, true, objSize
		} else if d.whole && len(diff) > 0 {
			diff = intervals{{0, objSize}}
		}
		diffIval := intersectSet(diff, objIval)
		var zeroIval intervals
		if endSize < prevEndSize {
			// truncated: what lies beyond the new size is removed, not
			// data
			zeroIval = intersectSet(intervals{{endSize, prevEndSize - endSize}}, objIval)
			for _, z := range zeroIval {
				diffIval.erase(z.off, z.len)
			}
		}
		prevEndSize, start = endSize, end
		if end <= d.from {
			// the starting point: only its size matters
			continue
		}
		if exists {
			data = diffIval
		} else {
			zeroIval.union(diffIval)
		}
		zero = zeroIval
	}
	if d.from == 0 {
		// from the image's creation nothing was removed
		zero = nil
		if len(data) == 0 {
			return d.parentOverlap(exts, base), nil
		}
	}
	var out []allocation
	for _, x := range exts {
		opos := x.Offset
		for _, b := range x.Buffer {
			for _, set := range []struct {
				ivs  intervals
				data bool
			}{{data, true}, {zero, false}} {
				for _, iv := range set.ivs.intersect(opos, b.Length) {
					out = append(out, allocation{base + b.Offset + iv.off - opos, iv.len, set.data})
				}
			}
			opos += b.Length
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].off < out[j].off })
	return out, nil
}

// intersectSet is the intersection of two interval sets.
func intersectSet(a, b intervals) intervals {
	var out intervals
	for _, iv := range b {
		out = append(out, a.intersect(iv.off, iv.len)...)
	}
	return out
}

// parentOverlap reports what a clone diffed from its creation reads
// from its parent within the object's extents.
func (d *snapDiff) parentOverlap(exts []striper.ObjectExtent, base uint64) []allocation {
	if d.from != 0 || len(d.parent) == 0 {
		return nil
	}
	var out []allocation
	for _, x := range exts {
		for _, b := range x.Buffer {
			for _, iv := range d.parent.intersect(base+b.Offset, b.Length) {
				out = append(out, allocation{iv.off, iv.len, true})
			}
		}
	}
	return out
}

// calcSnapSetDiff is librados' calc_snap_set_diff as Ceph 16.2 has it:
// the byte ranges of an object that differ between snapshot ids start
// and end, the object's size at end and whether it exists there, and
// whether the whole object must be taken as changed (a clone whose
// snapshots were all trimmed). Later releases also drop ranges
// truncated away below the size at start from the data; the list-snaps
// caller reports truncations as removed either way.
func calcSnapSetDiff(ss rados.SnapSet, start, end uint64) (diff intervals, endSize uint64, endExists, whole bool) {
	sawStart := false
	var startSize uint64
	cl := ss.Clones
	for i := 0; i < len(cl); {
		c := cl[i]
		var a, b uint64
		switch {
		case c.CloneID == rados.SnapHead:
			// the head is what every snapshot after the object's last
			// seen one reads
			a, b = ss.Seq+1, rados.SnapHead
		case len(c.Snaps) == 0:
			return nil, 0, false, true
		default:
			a, b = c.Snaps[0], c.Snaps[len(c.Snaps)-1]
		}
		if b < start {
			i++
			continue
		}
		if !sawStart {
			if start < a {
				// the object did not exist at start
				diff.insert(0, c.Size)
			} else {
				startSize = c.Size
			}
			sawStart = true
		}
		endSize = c.Size
		if end < a {
			// the object does not exist at end: all it held at start is
			// gone
			diff = nil
			diff.insert(0, startSize)
			return diff, endSize, false, false
		}
		if end <= b {
			return diff, endSize, true, false
		}
		// the most that can differ up to the next clone, less what they
		// share
		maxSize := c.Size
		i++
		if i < len(cl) {
			maxSize = max(maxSize, cl[i].Size)
		}
		var toNext intervals
		toNext.insert(0, maxSize)
		for _, o := range c.Overlap {
			toNext.erase(o.Offset, o.Length)
		}
		diff.union(toNext)
	}
	return diff, endSize, false, false
}

// Object states of a fast diff (librbd's OBJECT_DIFF_STATE_*).
const (
	objectDiffNone    = 0
	objectDiffUpdated = 1
	objectDiffHole    = 2
)

// diffObjectMaps is librbd's diff_object_map: each object's change
// between snapshot ids from and end from the object maps of the
// snapshots in between.
func (img *Image) diffObjectMaps(ctx context.Context, h *header, from, end uint64) ([]uint8, error) {
	// snapshots oldest first, then the head
	ids := make([]uint64, 0, len(h.snaps)+1)
	sizes := map[uint64]uint64{noSnap: h.size}
	flags := map[uint64]uint64{noSnap: h.flags}
	for i := len(h.snaps) - 1; i >= 0; i-- {
		s := h.snaps[i]
		ids = append(ids, s.ID)
		sizes[s.ID], flags[s.ID] = s.Size, s.Flags
	}
	ids = append(ids, noSnap)
	fromStart := from == 0
	if fromStart {
		// the map at end alone says what exists
		from = end
	}
	var state []uint8
	var prev *objectmap.BitVector
	for _, id := range ids {
		if id < from {
			continue
		}
		if id > end {
			break
		}
		if flags[from]&FlagFastDiffInvalid != 0 {
			return nil, fmt.Errorf("%w: fast diff flagged invalid", ErrInvalid)
		}
		bv, err := img.loadObjectMapAt(ctx, id)
		if err != nil {
			return nil, err
		}
		n := h.layout.NumObjects(sizes[id])
		if bv.Len() < n {
			return nil, fmt.Errorf("%w: object map of snapshot %d holds %d objects, not %d", ErrInvalid, id, bv.Len(), n)
		}
		next := make([]uint8, n)
		copy(next, state)
		state = next
		var overlap uint64
		if prev != nil {
			overlap = min(n, prev.Len())
		}
		for i := uint64(0); i < overlap; i++ {
			cur, old := bv.Get(i), prev.Get(i)
			switch {
			case cur == objectmap.Nonexistent:
				if old != objectmap.Nonexistent {
					state[i] = objectDiffHole
				}
			case cur == objectmap.Exists || (old != cur && !(old == objectmap.Exists && cur == objectmap.ExistsClean)):
				state[i] = objectDiffUpdated
			}
		}
		if fromStart || prev != nil {
			for i := overlap; i < n; i++ {
				if bv.Get(i) == objectmap.Nonexistent {
					state[i] = objectDiffNone
				} else {
					state[i] = objectDiffUpdated
				}
			}
		}
		trimmed := objectmap.New(n)
		for i := uint64(0); i < n; i++ {
			trimmed.Set(i, bv.Get(i))
		}
		prev = trimmed
	}
	return state, nil
}

// emitObjectDiff reports a fast diff's changed objects within [off,
// off+length), in image order period by period, as the list-snaps path
// does.
func emitObjectDiff(h *header, state []uint8, off, length uint64, fn func(off, length int64, exists bool) error) error {
	var pieces []allocation
	flush := func() error {
		sort.Slice(pieces, func(a, b int) bool { return pieces[a].off < pieces[b].off })
		err := emitExtents(pieces, fn)
		pieces = pieces[:0]
		return err
	}
	lastPeriod := uint64(0)
	for _, x := range h.layout.MapExtents(off, length) {
		if p := x.ObjectNo / h.layout.StripeCount; p != lastPeriod {
			if err := flush(); err != nil {
				return err
			}
			lastPeriod = p
		}
		if x.ObjectNo >= uint64(len(state)) || state[x.ObjectNo] == objectDiffNone {
			continue
		}
		for _, b := range x.Buffer {
			pieces = append(pieces, allocation{off + b.Offset, b.Length, state[x.ObjectNo] == objectDiffUpdated})
		}
	}
	return flush()
}
