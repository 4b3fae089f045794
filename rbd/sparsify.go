package rbd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd/internal/cls"
	"github.com/purerbd/purerbd/rbd/objectmap"
	"github.com/purerbd/purerbd/rbd/striper"
)

// Sparsify deallocates the zeroed parts of the image's data objects, as
// librbd's SparsifyRequest (rbd sparsify) does, object by object in the
// OSD (the rbd class's sparsify method): zero runs of at least
// sparseSize aligned bytes are punched out, trailing zeros truncated,
// and an object left empty removed, unless a clone's parent shows
// through it. The object map follows, for the objects it marks as
// written since the last snapshot. progress, if not nil, hears how many
// objects are done.
func (img *Image) Sparsify(ctx context.Context, sparseSize uint64, progress func(done, total uint64)) error {
	if sparseSize < 4096 || sparseSize&(sparseSize-1) != 0 {
		return fmt.Errorf("%w: sparse size %d (want a power of two of at least 4096)", ErrInvalid, sparseSize)
	}
	h, om, err := img.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer img.endWrite()
	total := h.layout.NumObjects(h.size)
	overlapObjects := uint64(0)
	if h.parent != nil && h.overlap > 0 {
		overlapObjects = h.layout.NumObjects(h.overlap)
	}
	var (
		mu       sync.Mutex
		finished uint64
	)
	return forEach(ctx, int(total), func(ctx context.Context, i int) error {
		n := uint64(i)
		if err := img.sparsifyObject(ctx, h, om, n, sparseSize, n >= overlapObjects); err != nil {
			return err
		}
		if progress != nil {
			mu.Lock()
			finished++
			progress(finished, total)
			mu.Unlock()
		}
		return nil
	})
}

// sparsifyObject is C_SparsifyObject for object n.
func (img *Image) sparsifyObject(ctx context.Context, h *header, om *objectMap, n, sparseSize uint64, removeEmpty bool) error {
	if om != nil && om.get(n) == objectmap.Nonexistent {
		return nil
	}
	held := img.objLocks.lock(n)
	defer held.unlock()
	oid := striper.ObjectName(h.prefix, n)
	err := img.data.write(ctx, oid, h.snapc, newWrite(cls.Sparsify(sparseSize, removeEmpty)))
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rbd: sparsifying %s: %w", oid, err)
	}
	if !removeEmpty || om == nil || om.get(n) != objectmap.Exists {
		return nil
	}
	exists := objectmap.Exists
	if err := om.update(ctx, n, n+1, objectmap.Pending, &exists); err != nil {
		return err
	}
	state := objectmap.Exists
	r := rados.NewReadOp()
	r.Stat()
	if err := img.data.read(ctx, oid, noSnap, r); errors.Is(err, syscall.ENOENT) {
		state = objectmap.Nonexistent
	} else if err != nil {
		return fmt.Errorf("rbd: stat %s: %w", oid, err)
	}
	pending := objectmap.Pending
	return om.update(ctx, n, n+1, state, &pending)
}
