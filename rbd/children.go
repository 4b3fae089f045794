package rbd

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// Listing the clones of a snapshot, and their clones, as librbd's
// list_children and list_descendants do: clone v1 children are recorded
// in the rbd_children object of the child's pool, clone v2 children on
// the parent snapshot in its header; names come from each child pool's
// directory, or from its trash for an image moved there.

// LinkedImage is an image made from a snapshot: a clone, or a clone of
// a clone.
type LinkedImage struct {
	PoolID        int64
	PoolNamespace string
	ID            string
	Name          string
	// Trash is set for an image in its pool's trash.
	Trash bool
}

// Descendants lists the images cloned from snapshot snapName (from any
// of the image's snapshots when snapName is ""), and, down to depth
// levels, the images cloned from their snapshots: depth 1 lists the
// clones alone, 0 sets no limit. The order is the discovery order;
// callers sort. ErrNotFound when there is no such snapshot, or a child
// is in neither its pool's directory nor its trash.
func (img *Image) Descendants(ctx context.Context, snapName string, depth int) ([]LinkedImage, error) {
	h, err := img.header(ctx)
	if err != nil {
		return nil, err
	}
	var snaps []uint64
	if snapName != "" {
		s, ok := h.snapByName(snapName)
		if !ok {
			return nil, fmt.Errorf("%w: snapshot %s@%s", ErrNotFound, img.name, snapName)
		}
		snaps = []uint64{s.ID}
	} else {
		snaps = h.snapc.Snaps
	}
	var out []LinkedImage
	if h.features&FeatureLayering != 0 {
		for _, snap := range snaps {
			if err := descendants(ctx, img.meta, img.id, snap, depth, &out); err != nil {
				return nil, err
			}
		}
	}
	if err := nameLinked(ctx, img.meta, out); err != nil {
		return nil, err
	}
	return out, nil
}

// descendants appends the children of snapshot snap of image id (in o's
// pool and namespace) to out, each followed by its own descendants
// while depth allows (0: no limit).
func descendants(ctx context.Context, o objects, id string, snap uint64, depth int, out *[]LinkedImage) error {
	deeper := depth != 1
	next := depth
	if depth > 1 {
		next--
	}
	parent := cls.ParentImageSpec{PoolID: o.poolID(), PoolNamespace: o.namespace(), ImageID: id, SnapID: snap}
	pools, err := o.poolIDs(ctx)
	if err != nil {
		return err
	}
	for _, pid := range pools {
		po, err := o.pool(ctx, pid, o.namespace())
		if errors.Is(err, rados.ErrPoolNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return err
		}
		reply, err := call(ctx, po, childrenObject, cls.GetChildren(parent))
		if optional(err) != nil {
			return fmt.Errorf("rbd: listing the v1 children of %s@%d in pool %d: %w", id, snap, pid, err)
		}
		if err != nil {
			continue
		}
		ids, err := cls.DecodeStringList(reply)
		if err != nil {
			return err
		}
		for _, cid := range ids {
			*out = append(*out, LinkedImage{PoolID: pid, PoolNamespace: o.namespace(), ID: cid})
			if deeper {
				if err := imageDescendants(ctx, po, cid, next, out); err != nil {
					return err
				}
			}
		}
	}
	reply, err := call(ctx, o, headerObject(id), cls.ChildrenList(snap))
	if optional(err) != nil {
		return fmt.Errorf("rbd: listing the children of %s@%d: %w", id, snap, err)
	}
	if err != nil {
		return nil
	}
	children, err := cls.DecodeChildrenList(reply)
	if err != nil {
		return err
	}
	for _, c := range children {
		*out = append(*out, LinkedImage{PoolID: c.PoolID, PoolNamespace: c.PoolNamespace, ID: c.ImageID})
		if !deeper {
			continue
		}
		co, err := o.pool(ctx, c.PoolID, c.PoolNamespace)
		if errors.Is(err, rados.ErrPoolNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := imageDescendants(ctx, co, c.ImageID, next, out); err != nil {
			return err
		}
	}
	return nil
}

// imageDescendants appends the descendants of every snapshot of image id
// (a child found on the way down; one that is gone has none).
func imageDescendants(ctx context.Context, o objects, id string, depth int, out *[]LinkedImage) error {
	r := rados.NewReadOp()
	features, snapc := readCall(r, cls.GetFeatures(noSnap, true)), readCall(r, cls.GetSnapContext())
	if err := o.read(ctx, headerObject(id), noSnap, r); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil
		}
		return fmt.Errorf("rbd: reading header of descendant %s: %w", id, err)
	}
	f, _, err := cls.DecodeGetFeatures(features.Output)
	if err != nil {
		return err
	}
	sc, err := cls.DecodeGetSnapContext(snapc.Output)
	if err != nil {
		return err
	}
	if Feature(f)&FeatureLayering == 0 {
		return nil
	}
	for _, snap := range sc.Snaps {
		if err := descendants(ctx, o, id, snap, depth, out); err != nil {
			return err
		}
	}
	return nil
}

// nameLinked fills in the names of images, and whether they are in the
// trash, from the directory and trash of each pool and namespace.
func nameLinked(ctx context.Context, o objects, images []LinkedImage) error {
	type where struct {
		pool int64
		ns   string
	}
	type entry struct {
		name  string
		trash bool
	}
	byID := map[where]map[string]entry{}
	for i := range images {
		li := &images[i]
		w := where{li.PoolID, li.PoolNamespace}
		ids, ok := byID[w]
		if !ok {
			po, err := o.pool(ctx, w.pool, w.ns)
			if err != nil {
				return err
			}
			ids = map[string]entry{}
			dir, err := listDirectory(ctx, po)
			if err != nil {
				return err
			}
			for _, e := range dir {
				ids[e.ID] = entry{name: e.Name}
			}
			trash, err := trashList(ctx, po)
			if err != nil && !errors.Is(err, syscall.EOPNOTSUPP) {
				return err
			}
			for _, t := range trash {
				ids[t.ID] = entry{name: t.Name, trash: true}
			}
			byID[w] = ids
		}
		e, ok := ids[li.ID]
		if !ok {
			return fmt.Errorf("%w: the name of image id %s in pool %d namespace %q", ErrNotFound, li.ID, w.pool, w.ns)
		}
		li.Name, li.Trash = e.name, e.trash
	}
	return nil
}
