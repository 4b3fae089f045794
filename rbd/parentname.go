package rbd

import (
	"context"
	"errors"
	"fmt"

	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// ParentNames is a clone's parent as rbd info shows it: the parent
// image's name (from its pool's directory, or its trash), whether it is
// in the trash, and the parent snapshot's name.
type ParentNames struct {
	Image    string
	Trash    bool
	Snapshot string
}

// ParentNames looks up the names of the clone's parent image and
// snapshot (ErrNotFound for an image that is not a clone).
func (img *Image) ParentNames(ctx context.Context) (ParentNames, error) {
	p, _ := img.Parent()
	if p == nil {
		return ParentNames{}, fmt.Errorf("%w: image %q has no parent", ErrNotFound, img.name)
	}
	po, err := img.meta.pool(ctx, p.PoolID, p.PoolNamespace)
	if err != nil {
		return ParentNames{}, err
	}
	var out ParentNames
	out.Image, err = imageNameOf(ctx, po, p.ImageID)
	if errors.Is(err, ErrNotFound) {
		trash, terr := trashList(ctx, po)
		if terr != nil {
			return ParentNames{}, terr
		}
		for _, t := range trash {
			if t.ID == p.ImageID {
				out.Image, out.Trash, err = t.Name, true, nil
			}
		}
	}
	if err != nil {
		return ParentNames{}, err
	}
	reply, err := call(ctx, po, headerObject(p.ImageID), cls.SnapshotGet(p.SnapID))
	if err != nil {
		return ParentNames{}, fmt.Errorf("rbd: reading parent snapshot %d of %q: %w", p.SnapID, img.name, err)
	}
	snap, err := cls.DecodeSnapshotGet(reply)
	if err != nil {
		return ParentNames{}, err
	}
	out.Snapshot = snap.Name
	return out, nil
}
