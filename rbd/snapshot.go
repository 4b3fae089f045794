package rbd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
	"github.com/purerbd/purerbd/rbd/striper"
)

// Snapshots: self-managed RADOS snapshots recorded in the header. Every
// write carries the image's snapshot context, so the OSDs keep each
// object's data as of each snapshot.

// Snapshots lists the image's snapshots, newest first.
func (img *Image) Snapshots(ctx context.Context) ([]SnapInfo, error) {
	if err := img.refresh(ctx); err != nil {
		return nil, err
	}
	return snapInfos(img.hdr.Load().snaps), nil
}

// SnapshotsBefore lists the user snapshots taken before the one the
// image is open at (all of them, for the head), oldest first: the
// snapshots Diff can start from.
func (img *Image) SnapshotsBefore(ctx context.Context) ([]SnapInfo, error) {
	all, err := img.Snapshots(ctx)
	if err != nil {
		return nil, err
	}
	var out []SnapInfo
	for _, s := range all {
		if s.Namespace == SnapNamespaceUser && (img.snapID == noSnap || s.ID < img.snapID) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b SnapInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func validSnapName(name string) error {
	if name == "" || len(name) > maxNameLength || strings.ContainsAny(name, "/@") {
		return fmt.Errorf("%w: snapshot name %q", ErrInvalid, name)
	}
	return nil
}

// CreateSnapshot takes a snapshot of the image's head. Writes are held
// back while it is taken, so it holds exactly the writes acknowledged
// before it.
func (img *Image) CreateSnapshot(ctx context.Context, name string) error {
	if err := validSnapName(name); err != nil {
		return err
	}
	err := img.exclusive(ctx, func(ctx context.Context, guard []cls.Method) error {
		if _, ok := img.hdr.Load().snapByName(name); ok {
			return fmt.Errorf("%w: snapshot %s@%s", ErrExists, img.name, name)
		}
		_, err := img.createSnapshotLocked(ctx, name, cls.UserNamespace, guard)
		return err
	})
	if err != nil {
		return err
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// createSnapshotLocked adds snapshot name in namespace ns and returns
// its id; the caller holds the lock with writes held back.
func (img *Image) createSnapshotLocked(ctx context.Context, name string, ns cls.SnapshotNamespace, guard []cls.Method) (uint64, error) {
	h := img.hdr.Load()
	for attempt := 0; ; attempt++ {
		// a reserved id is older than this call: if it is stale for
		// the image, the next attempt allocates a fresh one
		id, err := img.allocSnapID(ctx, attempt == 0)
		if err != nil {
			return 0, fmt.Errorf("rbd: allocating a snapshot id: %w", err)
		}
		w := newWrite(guard...)
		writeCalls(w, cls.SnapshotAdd(id, name, ns))
		err = img.meta.write(ctx, headerObject(img.id), denc.SnapContext{}, w)
		if err != nil {
			_ = img.data.releaseSnap(context.WithoutCancel(ctx), id)
			if errors.Is(err, syscall.ESTALE) && attempt < 5 {
				if err := img.refresh(ctx); err != nil {
					return 0, err
				}
				h = img.hdr.Load()
				continue
			}
			if errors.Is(err, syscall.EEXIST) {
				return 0, fmt.Errorf("%w: snapshot %s@%s", ErrExists, img.name, name)
			}
			return 0, fmt.Errorf("rbd: adding snapshot %s@%s: %w", img.name, name, err)
		}
		if img.lock != nil {
			if om := img.lock.objectMap(); om != nil {
				if err := om.snapshot(ctx, id, h.features&FeatureFastDiff != 0); err != nil {
					return 0, err
				}
			}
		}
		return id, img.refresh(ctx)
	}
}

// allocSnapID allocates a snapshot id in the data pool, or takes the one
// OpenOptions.SnapIDs reserved there when mayReserve.
func (img *Image) allocSnapID(ctx context.Context, mayReserve bool) (uint64, error) {
	if r := img.opts.SnapIDs; r != nil && mayReserve {
		id, _, err := r.take(ctx, img.data)
		return id, err
	}
	return img.data.allocSnap(ctx)
}

// snapChildren lists the clones of snapshot snap (clone v2 and v1).
func (img *Image) snapChildren(ctx context.Context, snap uint64) ([]cls.ChildImageSpec, error) {
	var out []cls.ChildImageSpec
	reply, err := call(ctx, img.meta, headerObject(img.id), cls.ChildrenList(snap))
	if err == nil {
		if out, err = cls.DecodeChildrenList(reply); err != nil {
			return nil, err
		}
	} else if optional(err) != nil {
		return nil, fmt.Errorf("rbd: listing children of %s@%d: %w", img.name, snap, err)
	}
	reply, err = call(ctx, img.meta, childrenObject, cls.GetChildren(cls.ParentImageSpec{
		PoolID: img.meta.poolID(), PoolNamespace: img.meta.namespace(), ImageID: img.id, SnapID: snap}))
	if err == nil {
		ids, err := cls.DecodeStringList(reply)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			out = append(out, cls.ChildImageSpec{PoolID: img.meta.poolID(), ImageID: id})
		}
	} else if optional(err) != nil {
		return nil, fmt.Errorf("rbd: listing v1 children of %s@%d: %w", img.name, snap, err)
	}
	return out, nil
}

// RemoveSnapshot deletes a snapshot. A protected snapshot is refused
// (ErrProtected), and so is one with clone v1 children (ErrHasChildren).
// A snapshot that still has clone v2 children is moved to the snapshot
// trash instead, as librbd does: it disappears from the user's view and
// is deleted when its last clone goes away.
func (img *Image) RemoveSnapshot(ctx context.Context, name string) error {
	return img.withSnapshot(ctx, name, img.removeSnapshotLocked)
}

// withSnapshot calls locked with user snapshot name under the exclusive
// lock, writes held back, and announces the header change after it
// succeeds.
func (img *Image) withSnapshot(ctx context.Context, name string, locked func(ctx context.Context, s snapMeta, guard []cls.Method) error) error {
	err := img.exclusive(ctx, func(ctx context.Context, guard []cls.Method) error {
		s, ok := img.hdr.Load().snapByName(name)
		if !ok {
			return fmt.Errorf("%w: snapshot %s@%s", ErrNotFound, img.name, name)
		}
		return locked(ctx, s, guard)
	})
	if err != nil {
		return err
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// removeSnapshotLocked removes (or trashes) snapshot s; the caller holds
// the lock with writes held back.
func (img *Image) removeSnapshotLocked(ctx context.Context, s snapMeta, guard []cls.Method) error {
	h := img.hdr.Load()
	name := s.Name
	if s.ProtectionStatus != cls.Unprotected {
		return fmt.Errorf("%w: snapshot %s@%s", ErrProtected, img.name, name)
	}
	children, err := img.snapChildren(ctx, s.ID)
	if err != nil {
		return err
	}
	if len(children) > 0 {
		v2, err := img.v2Children(ctx, s.ID)
		if err != nil {
			return err
		}
		// librbd trashes user and group snapshots alike: a group
		// snapshot removed while clones of a member need it leaves
		// that member snapshot in the trash.
		trashable := s.Namespace.Type == cls.NamespaceUser || s.Namespace.Type == cls.NamespaceGroup
		if len(v2) < len(children) || !trashable {
			return fmt.Errorf("%w: snapshot %s@%s has %d clone(s)", ErrHasChildren, img.name, name, len(children))
		}
		w := newWrite(guard...)
		writeCalls(w, cls.SnapshotTrashAdd(s.ID))
		if err := img.meta.write(ctx, headerObject(img.id), denc.SnapContext{}, w); err != nil {
			return fmt.Errorf("rbd: moving snapshot %s@%s to the trash: %w", img.name, name, err)
		}
		img.log.Info("snapshot has clones: moved to the snapshot trash", "snap", name, "clones", len(children))
		return img.refresh(ctx)
	}
	if h.features&FeatureObjectMap != 0 {
		if err := img.removeSnapObjectMap(ctx, h, s.ID, guard); err != nil {
			return err
		}
	}
	if err := img.data.releaseSnap(ctx, s.ID); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("rbd: releasing snapshot id %d: %w", s.ID, err)
	}
	w := newWrite(guard...)
	writeCalls(w, cls.SnapshotRemove(s.ID))
	if err := img.meta.write(ctx, headerObject(img.id), denc.SnapContext{}, w); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("rbd: removing snapshot %s@%s: %w", img.name, name, err)
	}
	return img.refresh(ctx)
}

// v2Children lists the clone v2 children of a snapshot.
func (img *Image) v2Children(ctx context.Context, snap uint64) ([]cls.ChildImageSpec, error) {
	reply, err := call(ctx, img.meta, headerObject(img.id), cls.ChildrenList(snap))
	if err != nil {
		if optional(err) == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("rbd: listing children of %s@%d: %w", img.name, snap, err)
	}
	return cls.DecodeChildrenList(reply)
}

// removeTrashedSnapshot deletes snapshot id of image id if it sits in the
// snapshot trash without clones (after its last clone was detached).
func removeTrashedSnapshot(ctx context.Context, o objects, id string, snap uint64, log *slog.Logger) error {
	img, err := openImage(ctx, o, "", id, OpenOptions{Logger: log})
	if err != nil {
		return err
	}
	defer img.CloseContext(ctx)
	err = img.exclusive(ctx, func(ctx context.Context, guard []cls.Method) error {
		s, ok := img.hdr.Load().snapByID(snap)
		if !ok || s.Namespace.Type != cls.NamespaceTrash || s.ChildCount > 0 {
			return nil
		}
		return img.removeSnapshotLocked(ctx, s, guard)
	})
	if err != nil {
		return err
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// removeSnapObjectMap folds a removed snapshot's object map into the next
// newer one (fast-diff) and deletes it.
func (img *Image) removeSnapObjectMap(ctx context.Context, h *header, snap uint64, guard []cls.Method) error {
	oid := objectMapObject(img.id, snap)
	if h.features&FeatureFastDiff != 0 {
		out, err := call(ctx, img.meta, oid, cls.ObjectMapLoad())
		if err == nil {
			bv, err := cls.DecodeObjectMapLoad(out)
			if err != nil {
				return err
			}
			next := noSnap
			for _, s := range h.snaps { // newest first
				if s.ID > snap {
					next = s.ID
				}
			}
			dst := objectMapObject(img.id, next)
			w := rados.NewWriteOp()
			if next == noSnap {
				writeCalls(w, cls.AssertLocked(lockName, cls.LockExclusive, "", ""))
			}
			writeCalls(w, cls.ObjectMapSnapRemove(bv))
			if err := img.meta.write(ctx, dst, denc.SnapContext{}, w); err != nil && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("rbd: folding object map of snapshot %d into %s: %w", snap, dst, err)
			}
			if next == noSnap && img.lock != nil {
				if om := img.lock.objectMap(); om != nil {
					if err := om.reload(ctx); err != nil {
						return err
					}
				}
			}
		} else if !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rbd: loading object map %s: %w", oid, err)
		}
	}
	if err := deleteObject(ctx, img.meta, oid, denc.SnapContext{}); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("rbd: removing object map %s: %w", oid, err)
	}
	return nil
}

// ProtectSnapshot protects a snapshot (clones of it can be made, it
// cannot be removed).
func (img *Image) ProtectSnapshot(ctx context.Context, name string) error {
	return img.setProtection(ctx, name, true)
}

// UnprotectSnapshot unprotects a snapshot that has no clones.
func (img *Image) UnprotectSnapshot(ctx context.Context, name string) error {
	return img.setProtection(ctx, name, false)
}

func (img *Image) setProtection(ctx context.Context, name string, protect bool) error {
	if img.readOnly {
		return ErrReadOnly
	}
	if err := img.refresh(ctx); err != nil {
		return err
	}
	h := img.hdr.Load()
	if h.features&FeatureLayering == 0 {
		return fmt.Errorf("%w: image %q does not have the layering feature", ErrInvalid, img.name)
	}
	s, ok := h.snapByName(name)
	if !ok {
		return fmt.Errorf("%w: snapshot %s@%s", ErrNotFound, img.name, name)
	}
	oid := headerObject(img.id)
	set := func(st uint8) error {
		return callWrite(ctx, img.meta, oid, cls.SetProtectionStatus(s.ID, st))
	}
	if protect {
		if s.ProtectionStatus == cls.Protected {
			return fmt.Errorf("%w: snapshot %s@%s is already protected", ErrBusy, img.name, name)
		}
		if err := set(cls.Protected); err != nil {
			return fmt.Errorf("rbd: protecting %s@%s: %w", img.name, name, err)
		}
	} else {
		if s.ProtectionStatus == cls.Unprotected {
			return fmt.Errorf("%w: snapshot %s@%s is not protected", ErrInvalid, img.name, name)
		}
		if err := set(cls.Unprotecting); err != nil {
			return fmt.Errorf("rbd: unprotecting %s@%s: %w", img.name, name, err)
		}
		children, err := img.snapChildren(ctx, s.ID)
		if err == nil && len(children) > 0 {
			err = fmt.Errorf("%w: snapshot %s@%s has %d clone(s)", ErrHasChildren, img.name, name, len(children))
		}
		if err != nil {
			_ = set(cls.Protected)
			return err
		}
		if err := set(cls.Unprotected); err != nil {
			return fmt.Errorf("rbd: unprotecting %s@%s: %w", img.name, name, err)
		}
	}
	if err := img.refresh(ctx); err != nil {
		return err
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// RollbackSnapshot makes the head identical to a snapshot (size, data
// and object map).
func (img *Image) RollbackSnapshot(ctx context.Context, name string) error {
	return img.withSnapshot(ctx, name, img.rollbackLocked)
}

// rollbackLocked makes the head identical to snapshot s; the caller
// holds the lock with writes held back.
func (img *Image) rollbackLocked(ctx context.Context, s snapMeta, guard []cls.Method) error {
	h := img.hdr.Load()
	name := s.Name
	if s.Size != h.size {
		if err := img.resizeLocked(ctx, s.Size, guard); err != nil {
			return err
		}
		h = img.hdr.Load()
	}
	var om *objectMap
	if img.lock != nil {
		om = img.lock.objectMap()
	}
	if om != nil {
		out, err := call(ctx, img.meta, objectMapObject(img.id, s.ID), cls.ObjectMapLoad())
		if err != nil {
			return fmt.Errorf("rbd: loading object map of snapshot %s: %w", name, err)
		}
		bv, err := cls.DecodeObjectMapLoad(out)
		if err != nil {
			return err
		}
		w := newWrite(cls.AssertLocked(lockName, cls.LockExclusive, "", ""))
		w.WriteFull(bv.Marshal())
		err = img.meta.write(ctx, om.oid, denc.SnapContext{}, w)
		if err != nil {
			return fmt.Errorf("rbd: rolling back object map: %w", err)
		}
		if err := om.reload(ctx); err != nil {
			return err
		}
	}
	n := h.layout.NumObjects(s.Size)
	err := forEach(ctx, int(n), func(ctx context.Context, i int) error {
		oid := striper.ObjectName(h.prefix, uint64(i))
		w := rados.NewWriteOp()
		w.Rollback(s.ID)
		err := img.data.write(ctx, oid, h.snapc, w)
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rbd: rolling back %s: %w", oid, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return img.refresh(ctx)
}
