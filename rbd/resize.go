package rbd

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
	"github.com/purerbd/purerbd/rbd/objectmap"
	"github.com/purerbd/purerbd/rbd/striper"
)

// Resize changes the image size. Growing adds zeros; shrinking discards
// the data past the new end (snapshots keep theirs), as librbd's
// ResizeRequest and TrimRequest do.
func (img *Image) Resize(ctx context.Context, size int64) error {
	if size < 0 {
		return fmt.Errorf("%w: negative size", ErrInvalid)
	}
	err := img.exclusive(ctx, func(ctx context.Context, guard []cls.Method) error {
		return img.resizeLocked(ctx, uint64(size), guard)
	})
	if err != nil {
		return err
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// resizeLocked resizes with writes held back and the lock (if any) held.
func (img *Image) resizeLocked(ctx context.Context, size uint64, guard []cls.Method) error {
	h := img.hdr.Load()
	if size == h.size {
		return nil
	}
	var om *objectMap
	if img.lock != nil {
		om = img.lock.objectMap()
	}
	newObjects := h.layout.NumObjects(size)
	if size > h.size {
		if om != nil {
			if err := om.resize(ctx, newObjects); err != nil {
				return err
			}
		}
	} else {
		if err := img.trim(ctx, h, om, size); err != nil {
			return err
		}
	}
	w := newWrite(guard...)
	writeCalls(w, cls.SetSize(size))
	if err := img.meta.write(ctx, headerObject(img.id), denc.SnapContext{}, w); err != nil {
		return fmt.Errorf("rbd: setting size of %q: %w", img.name, err)
	}
	if size < h.size && om != nil {
		if err := om.resize(ctx, newObjects); err != nil {
			return err
		}
	}
	return img.refresh(ctx)
}

// trim discards everything past newSize: whole objects beyond the last
// period are removed, the boundary objects truncated.
func (img *Image) trim(ctx context.Context, h *header, om *objectMap, newSize uint64) error {
	l := h.layout
	deleteStart := l.NumObjects(newSize)
	numObjects := l.NumObjects(h.size)
	period := l.Period()
	deleteOff := min((newSize+period-1)/period*period, h.size)
	var todo []uint64
	for n := deleteStart; n < numObjects; n++ {
		if om != nil && om.get(n) == objectmap.Nonexistent {
			continue
		}
		todo = append(todo, n)
	}
	pending := objectmap.Pending
	err := forEach(ctx, len(todo), func(ctx context.Context, i int) error {
		n := todo[i]
		if om != nil {
			if err := om.update(ctx, n, n+1, objectmap.Pending, nil); err != nil {
				return err
			}
		}
		oid := striper.ObjectName(h.prefix, n)
		if err := deleteObject(ctx, img.data, oid, h.snapc); err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rbd: removing %s: %w", oid, err)
		}
		if om != nil {
			return om.update(ctx, n, n+1, objectmap.Nonexistent, &pending)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if deleteOff <= newSize {
		return nil
	}
	exts := l.MapExtents(newSize, deleteOff-newSize)
	return forEach(ctx, len(exts), func(ctx context.Context, i int) error {
		x := exts[i]
		if om != nil && om.get(x.ObjectNo) == objectmap.Nonexistent {
			return nil
		}
		oid := striper.ObjectName(h.prefix, x.ObjectNo)
		if x.Offset == 0 && h.parent == nil {
			if om != nil {
				if err := om.update(ctx, x.ObjectNo, x.ObjectNo+1, objectmap.Pending, nil); err != nil {
					return err
				}
			}
			if err := deleteObject(ctx, img.data, oid, h.snapc); err != nil && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("rbd: removing %s: %w", oid, err)
			}
			if om != nil {
				return om.update(ctx, x.ObjectNo, x.ObjectNo+1, objectmap.Nonexistent, &pending)
			}
			return nil
		}
		w := rados.NewWriteOp()
		w.AssertExists()
		w.Truncate(x.Offset)
		err := img.data.write(ctx, oid, h.snapc, w)
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rbd: truncating %s: %w", oid, err)
		}
		return nil
	})
}
