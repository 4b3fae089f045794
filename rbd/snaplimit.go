package rbd

import (
	"context"
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// NoSnapshotLimit is the limit of an image whose number of snapshots is
// not capped (rbd snap limit clear).
const NoSnapshotLimit = ^uint64(0)

// SnapshotLimit returns the most snapshots the image may have
// (NoSnapshotLimit when there is no cap).
func (img *Image) SnapshotLimit(ctx context.Context) (uint64, error) {
	out, err := call(ctx, img.meta, headerObject(img.id), cls.SnapshotGetLimit())
	if err != nil {
		return 0, fmt.Errorf("rbd: reading the snapshot limit of %q: %w", img.name, err)
	}
	return cls.DecodeU64(out)
}

// SetSnapshotLimit caps the number of the image's snapshots at limit
// (NoSnapshotLimit lifts the cap), as rbd snap limit set and clear do:
// creating a snapshot beyond it then fails with EDQUOT, in the header's
// class method, for every client. A limit below the current number of
// snapshots fails with ERANGE.
func (img *Image) SetSnapshotLimit(ctx context.Context, limit uint64) error {
	err := img.exclusive(ctx, func(ctx context.Context, guard []cls.Method) error {
		w := newWrite(guard...)
		writeCalls(w, cls.SnapshotSetLimit(limit))
		if err := img.meta.write(ctx, headerObject(img.id), denc.SnapContext{}, w); err != nil {
			return fmt.Errorf("rbd: setting the snapshot limit of %q: %w", img.name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}
