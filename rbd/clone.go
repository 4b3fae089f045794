package rbd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
	"github.com/purerbd/purerbd/rbd/objectmap"
	"github.com/purerbd/purerbd/rbd/striper"
)

// Clones (layering): a clone's objects that do not exist yet read through
// to the parent snapshot, within the parent overlap; the first write to
// such an object copies the parent's data up into it.

// openParent opens the parent snapshot of a clone, read-only.
func (img *Image) openParent(ctx context.Context) error {
	h := img.hdr.Load()
	if h.parent == nil {
		return nil
	}
	p := h.parent
	po := img.meta
	if p.PoolID != img.meta.poolID() || p.PoolNamespace != img.meta.namespace() {
		var err error
		if po, err = img.meta.pool(ctx, p.PoolID, p.PoolNamespace); err != nil {
			return fmt.Errorf("rbd: image %q: parent pool %d: %w", img.name, p.PoolID, err)
		}
	}
	parent, err := openSnapshotByID(ctx, po, p.ImageID, p.SnapID, img.opts.Logger)
	if err != nil {
		return fmt.Errorf("rbd: image %q: opening parent %s@%d: %w", img.name, p.ImageID, p.SnapID, err)
	}
	img.parent = parent
	return nil
}

// openSnapshotByID opens image id at snapshot snap, read-only, without a
// watch (snapshots do not change).
func openSnapshotByID(ctx context.Context, o objects, id string, snap uint64, log *slog.Logger) (*Image, error) {
	opts := OpenOptions{ReadOnly: true, Logger: log}
	img := &Image{id: id, meta: o, data: o, opts: opts, snapID: snap, readOnly: true, log: discardOr(log).With("id", id, "snap", snap)}
	img.name, _ = imageNameOf(ctx, o, id)
	h, err := loadHeader(ctx, o, id, true)
	if err != nil {
		return nil, err
	}
	if err := h.checkFeatures(id, true); err != nil {
		return nil, err
	}
	if _, ok := h.snapByID(snap); !ok {
		return nil, fmt.Errorf("%w: snapshot %d of image %s", ErrNotFound, snap, id)
	}
	img.hdr.Store(h)
	if h.dataPool >= 0 && h.dataPool != o.poolID() {
		if img.data, err = o.pool(ctx, h.dataPool, o.namespace()); err != nil {
			return nil, err
		}
	}
	if err := img.openParent(ctx); err != nil {
		return nil, err
	}
	return img, nil
}

// parentOverlap is how much of the parent the open view sees.
func (img *Image) parentOverlap(h *header) uint64 {
	if img.snapID != noSnap {
		if s, ok := h.snapByID(img.snapID); ok {
			return s.ParentOverlap
		}
		return 0
	}
	return h.overlap
}

// readFromParent fills extent x (of an object the clone does not have)
// from the parent, zeros beyond the overlap.
func (img *Image) readFromParent(ctx context.Context, h *header, x striper.ObjectExtent, base uint64, p []byte) error {
	overlap := img.parentOverlap(h)
	for _, b := range x.Buffer {
		dst := p[b.Offset : b.Offset+b.Length]
		imgOff := base + b.Offset
		n := uint64(0)
		if imgOff < overlap {
			n = min(b.Length, overlap-imgOff)
			if err := img.readParent(ctx, dst[:n], int64(imgOff)); err != nil {
				return err
			}
		}
		clear(dst[n:])
	}
	return nil
}

// objectParentData returns the parent's data for the whole of object
// objno (nil when it is all zeros or outside the overlap).
func (img *Image) objectParentData(ctx context.Context, h *header, objno uint64) ([]byte, error) {
	overlap := img.parentOverlap(h)
	l := h.layout
	if l.ImageOffset(objno, 0) >= overlap && l.StripeCount == 1 {
		return nil, nil
	}
	data := make([]byte, l.ObjectSize)
	any := false
	for off := uint64(0); off < l.ObjectSize; off += l.StripeUnit {
		imgOff := l.ImageOffset(objno, off)
		if imgOff >= overlap {
			continue
		}
		n := min(l.StripeUnit, overlap-imgOff)
		if err := img.readParent(ctx, data[off:off+n], int64(imgOff)); err != nil {
			return nil, fmt.Errorf("copy-up: %w", err)
		}
		for _, c := range data[off : off+n] {
			if c != 0 {
				any = true
				break
			}
		}
	}
	if !any {
		return nil, nil
	}
	// trailing zeros need not be written
	end := len(data)
	for end > 0 && data[end-1] == 0 {
		end--
	}
	return data[:end], nil
}

// hasParentData reports whether object objno overlaps the parent data.
func (img *Image) hasParentData(h *header, objno uint64) bool {
	overlap := img.parentOverlap(h)
	l := h.layout
	for off := uint64(0); off < l.ObjectSize; off += l.StripeUnit {
		if l.ImageOffset(objno, off) < overlap {
			return true
		}
	}
	return false
}

// writeClone applies op to object objno of a clone, an object that holds
// parent data: when the object does not exist yet, the parent's data is
// copied up into it first, once, under the object's exclusive lock (writes
// racing the copy-up wait for it and then find the object).
func (img *Image) writeClone(ctx context.Context, om *objectMap, h *header, objno uint64, oid string, op func(w *rados.WriteOp)) error {
	return img.objectWrite(ctx, om, objno, false, func(ctx context.Context, exclusive bool) error {
		w := rados.NewWriteOp()
		w.AssertExists()
		op(w)
		err := img.data.write(ctx, oid, h.snapc, w)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, syscall.ENOENT):
			return fmt.Errorf("rbd: writing %s: %w", oid, err)
		case !exclusive:
			return errNeedExclusive
		}
		return img.copyup(ctx, h, objno, oid, op)
	})
}

// copyup copies the parent's data into object objno (if it still does
// not exist) and applies op (may be nil).
func (img *Image) copyup(ctx context.Context, h *header, objno uint64, oid string, op func(w *rados.WriteOp)) error {
	data, err := img.objectParentData(ctx, h, objno)
	if err != nil {
		return err
	}
	if len(h.snapc.Snaps) > 0 {
		// deep copy-up: the copied data belongs to the snapshots too, so
		// it is written as of before them
		if err := img.data.write(ctx, oid, denc.SnapContext{}, newWrite(cls.Copyup(data))); err != nil {
			return fmt.Errorf("rbd: copy-up of %s: %w", oid, err)
		}
		if op == nil {
			return nil
		}
		w := rados.NewWriteOp()
		op(w)
		if err := img.data.write(ctx, oid, h.snapc, w); err != nil {
			return fmt.Errorf("rbd: writing %s: %w", oid, err)
		}
		return nil
	}
	w := newWrite(cls.Copyup(data))
	if op != nil {
		op(w)
	}
	if err := img.data.write(ctx, oid, h.snapc, w); err != nil {
		return fmt.Errorf("rbd: copy-up and write of %s: %w", oid, err)
	}
	return nil
}

// zeroClone discards a range of a clone's object that holds parent data:
// it is copied up and zeroed (removing it would expose the parent).
func (img *Image) zeroClone(ctx context.Context, h *header, om *objectMap, x striper.ObjectExtent, oid string) error {
	op, _ := zeroOf(x, h.layout.ObjectSize)
	return img.writeClone(ctx, om, h, x.ObjectNo, oid, op)
}

func discardOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// detachFromParent removes a clone from its parent's list of children.
func detachFromParent(ctx context.Context, o objects, id string, h *header, log *slog.Logger) error {
	p := h.parent
	po := o
	if p.PoolID != o.poolID() || p.PoolNamespace != o.namespace() {
		var err error
		if po, err = o.pool(ctx, p.PoolID, p.PoolNamespace); err != nil {
			return fmt.Errorf("rbd: parent pool %d: %w", p.PoolID, err)
		}
	}
	var err error
	if h.opFeatures&OpFeatureCloneChild != 0 {
		err = callWrite(ctx, po, headerObject(p.ImageID), cls.ChildDetach(p.SnapID,
			cls.ChildImageSpec{PoolID: o.poolID(), PoolNamespace: o.namespace(), ImageID: id}))
	} else {
		err = callWrite(ctx, po, childrenObject, cls.RemoveChild(cls.ParentImageSpec{
			PoolID: p.PoolID, PoolNamespace: p.PoolNamespace, ImageID: p.ImageID, SnapID: p.SnapID}, id))
	}
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("rbd: detaching %s from parent %s@%d: %w", id, p.ImageID, p.SnapID, err)
	}
	notifyHeaderUpdateOf(ctx, po, p.ImageID)
	// a parent snapshot removed while it had clones waits in the trash
	// for its last clone
	if ph, err := loadHeader(ctx, po, p.ImageID, true); err == nil {
		if s, ok := ph.snapByID(p.SnapID); ok && s.Namespace.Type == cls.NamespaceTrash && s.ChildCount == 0 {
			if err := removeTrashedSnapshot(ctx, po, p.ImageID, p.SnapID, log); err != nil {
				// the clone is detached all the same; librbd also only
				// logs this (the snapshot stays in the trash)
				discardOr(log).Warn("removing the parent's trashed snapshot", "parent", p.ImageID, "snap", p.SnapID, "err", err)
			}
		}
	}
	return nil
}

// Clone creates childName (in childIoc's pool) as a clone v2 of
// parentName@snapName, as librbd's CloneRequest does: the child header
// records the parent (parent_attach), the child is marked clone-child and
// attached to the parent snapshot's children (child_attach). Order and
// striping default to the parent's; Features default to the parent's
// (layering is required).
func Clone(ctx context.Context, parentIoc *rados.IOContext, parentName, snapName string,
	childIoc *rados.IOContext, childName string, opts CreateOptions) error {
	return clone(ctx, parentIoc, parentName, snapName, func(h *header) (snapMeta, bool) { return h.snapByName(snapName) },
		childIoc, childName, opts)
}

// CloneFromSnapID is Clone of the parent's snapshot snapID, whatever its
// namespace: a member of a group snapshot, which no user snapshot name
// reaches, is cloned this way (rbd clone --snap-id, librbd's
// CloneRequest by snapshot id).
func CloneFromSnapID(ctx context.Context, parentIoc *rados.IOContext, parentName string, snapID uint64,
	childIoc *rados.IOContext, childName string, opts CreateOptions) error {
	return clone(ctx, parentIoc, parentName, "{id "+strconv.FormatUint(snapID, 10)+"}", func(h *header) (snapMeta, bool) {
		s, ok := h.snapByID(snapID)
		if ok && s.Namespace.Type == cls.NamespaceTrash {
			return snapMeta{}, false // removed: librbd refuses to clone it too
		}
		return s, ok
	}, childIoc, childName, opts)
}

func clone(ctx context.Context, parentIoc *rados.IOContext, parentName, snapName string, findSnap func(*header) (snapMeta, bool),
	childIoc *rados.IOContext, childName string, opts CreateOptions) error {
	po, err := adapt(parentIoc)
	if err != nil {
		return err
	}
	co, err := adapt(childIoc)
	if err != nil {
		return err
	}
	parentID, err := imageID(ctx, po, parentName)
	if err != nil {
		return err
	}
	ph, err := loadHeader(ctx, po, parentID, true)
	if err != nil {
		return err
	}
	if err := ph.checkFeatures(parentName, true); err != nil {
		return err
	}
	if ph.features&FeatureLayering == 0 {
		return fmt.Errorf("%w: parent %q does not have the layering feature", ErrInvalid, parentName)
	}
	snap, ok := findSnap(ph)
	if !ok {
		return fmt.Errorf("%w: snapshot %s@%s", ErrNotFound, parentName, snapName)
	}
	if opts.Order == 0 {
		opts.Order = ph.order
		if opts.StripeUnit == 0 && opts.StripeCount == 0 && ph.features&FeatureStripingV2 != 0 {
			opts.StripeUnit, opts.StripeCount = ph.layout.StripeUnit, ph.layout.StripeCount
		}
	}
	if opts.Features == 0 {
		opts.Features = ph.features &^ (FeatureOperations | FeatureDataPool | FeatureStripingV2)
		if opts.Features == 0 {
			opts.Features = FeatureLayering
		}
	}
	if opts.Features != FeatureNone && opts.Features&FeatureLayering == 0 {
		return fmt.Errorf("%w: clones need the layering feature", ErrInvalid)
	}
	spec := cls.ParentImageSpec{PoolID: po.poolID(), PoolNamespace: po.namespace(), ImageID: parentID, SnapID: snap.ID}
	_, err = create(ctx, co, childName, snap.Size, opts, func(ctx context.Context, id string) error {
		hdr := headerObject(id)
		if err := callWrite(ctx, co, hdr, cls.ParentAttach(spec, snap.Size, false)); err != nil {
			return fmt.Errorf("rbd: attaching parent to %q: %w", childName, err)
		}
		if err := callWrite(ctx, co, hdr, cls.OpFeaturesSet(OpFeatureCloneChild, OpFeatureCloneChild)); err != nil {
			return fmt.Errorf("rbd: marking %q a clone: %w", childName, err)
		}
		child := cls.ChildImageSpec{PoolID: co.poolID(), PoolNamespace: co.namespace(), ImageID: id}
		if err := callWrite(ctx, po, headerObject(parentID), cls.ChildAttach(snap.ID, child)); err != nil {
			return fmt.Errorf("rbd: attaching %q to %s@%s: %w", childName, parentName, snapName, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	notifyHeaderUpdateOf(ctx, po, parentID)
	return nil
}

// Flatten copies every object the clone still shares with its parent into
// the clone and detaches it from the parent.
func (img *Image) Flatten(ctx context.Context) error {
	return img.FlattenProgress(ctx, nil)
}

// FlattenProgress is Flatten reporting the objects done of those to copy
// up to progress (when not nil) after each one, as librbd's flatten
// reports to its ProgressContext.
func (img *Image) FlattenProgress(ctx context.Context, progress func(done, total uint64)) error {
	return img.FlattenWith(ctx, FlattenOptions{Progress: progress})
}

// FlattenOptions shape a flatten.
type FlattenOptions struct {
	// Progress, when not nil, is called with the objects done of those
	// to copy up after each one.
	Progress func(done, total uint64)
	// BeforeDetach, when not nil, runs once every object holds its own
	// data and before the clone is detached from its parent, as
	// librbd's flatten runs its crypto layer's flatten there (an
	// encrypted clone's header gets its LUKS magic back); an error
	// stops the flatten with the clone still attached.
	BeforeDetach func(ctx context.Context) error
}

// FlattenWith is Flatten with options.
func (img *Image) FlattenWith(ctx context.Context, o FlattenOptions) error {
	progress := o.Progress
	if img.readOnly {
		return ErrReadOnly
	}
	h, err := img.header(ctx)
	if err != nil {
		return err
	}
	if h.parent == nil || img.parent == nil {
		return fmt.Errorf("%w: image %q is not a clone", ErrInvalid, img.name)
	}
	// copy up object by object, through the normal write path (lock,
	// object map)
	n := h.layout.NumObjects(min(h.overlap, h.size))
	for objno := uint64(0); objno < n; objno++ {
		err := func() error {
			h, om, err := img.beginWrite(ctx)
			if err != nil {
				return err
			}
			defer img.endWrite()
			if h.parent == nil {
				return nil
			}
			held := img.objLocks.lock(objno)
			defer held.unlock()
			if !img.hasParentData(h, objno) {
				return nil
			}
			oid := striper.ObjectName(h.prefix, objno)
			r := rados.NewReadOp()
			r.Stat()
			if err := img.data.read(ctx, oid, noSnap, r); err == nil {
				return nil
			} else if !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("rbd: stat %s: %w", oid, err)
			}
			data, err := img.objectParentData(ctx, h, objno)
			if err != nil || data == nil {
				return err
			}
			if om != nil {
				if err := om.ensure(ctx, objno, objectmap.Exists); err != nil {
					return err
				}
			}
			return img.copyup(ctx, h, objno, oid, nil)
		}()
		if err != nil {
			return err
		}
		if progress != nil {
			progress(objno+1, n)
		}
	}
	if o.BeforeDetach != nil {
		if err := o.BeforeDetach(ctx); err != nil {
			return err
		}
	}
	err = img.exclusive(ctx, func(ctx context.Context, guard []cls.Method) error {
		h := img.hdr.Load()
		if h.parent == nil {
			return nil
		}
		if err := detachFromParent(ctx, img.meta, img.id, h, img.log); err != nil {
			return err
		}
		w := newWrite(guard...)
		writeCalls(w, cls.ParentDetach())
		if err := img.meta.write(ctx, headerObject(img.id), denc.SnapContext{}, w); err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rbd: detaching parent of %q: %w", img.name, err)
		}
		return img.refresh(ctx)
	})
	if err != nil {
		return err
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// ChildSpec names a clone of a snapshot.
type ChildSpec struct {
	PoolID        int64
	PoolNamespace string
	ImageID       string
}

// Children lists the clones of one of the image's snapshots.
func (img *Image) Children(ctx context.Context, snapName string) ([]ChildSpec, error) {
	h, err := img.header(ctx)
	if err != nil {
		return nil, err
	}
	s, ok := h.snapByName(snapName)
	if !ok {
		return nil, fmt.Errorf("%w: snapshot %s@%s", ErrNotFound, img.name, snapName)
	}
	specs, err := img.snapChildren(ctx, s.ID)
	if err != nil {
		return nil, err
	}
	out := make([]ChildSpec, len(specs))
	for i, c := range specs {
		out[i] = ChildSpec{PoolID: c.PoolID, PoolNamespace: c.PoolNamespace, ImageID: c.ImageID}
	}
	return out, nil
}

// Parent returns the clone's parent (nil for an image that is not a
// clone) and the parent overlap.
func (img *Image) Parent() (*ParentSpec, int64) {
	h := img.hdr.Load()
	return h.parent, int64(img.parentOverlap(h))
}
