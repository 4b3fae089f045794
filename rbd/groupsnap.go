package rbd

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// Group snapshots, as librbd's api::Group takes them: a record in the
// group header (state incomplete), then one snapshot of each member in
// the group snapshot namespace, taken while every member's exclusive
// lock is held with writes held back (so the snapshots are consistent
// with each other as a crash would leave them), then the record, with
// the image snapshots' ids, marked complete. purerbd sends no quiesce
// notification to the images' users first (rbd's --skip-quiesce).

// GroupSnapState is a group snapshot's state.
type GroupSnapState = cls.GroupSnapState

// The group snapshot states: incomplete (being taken, or its taking was
// interrupted) and complete.
const (
	GroupSnapIncomplete = cls.GroupSnapIncomplete
	GroupSnapComplete   = cls.GroupSnapComplete
)

// GroupSnapInfo describes a group snapshot.
type GroupSnapInfo struct {
	ID    string
	Name  string
	State GroupSnapState
	// Images are the member images' snapshots it is made of.
	Images []GroupImageSnap
}

// GroupImageSnap is one member's snapshot within a group snapshot.
type GroupImageSnap struct {
	PoolID  int64
	ImageID string
	SnapID  uint64
}

// groupImageSnapName is the name librbd gives a member's snapshot:
// .group.<group pool in hex>_<group id>_<group snapshot id>.
func groupImageSnapName(pool int64, gid, sid string) string {
	return fmt.Sprintf(".group.%x_%s_%s", pool, gid, sid)
}

// groupSnapList lists a group's snapshot records.
func groupSnapList(ctx context.Context, o objects, gid string) ([]cls.GroupSnapshot, error) {
	const page = 1024
	var out []cls.GroupSnapshot
	var start cls.GroupSnapshot
	for {
		reply, err := call(ctx, o, groupHeaderObject(gid), cls.GroupSnapList(start, page))
		if err != nil {
			return nil, fmt.Errorf("rbd: listing the snapshots of group %s: %w", gid, err)
		}
		snaps, err := cls.DecodeGroupSnapList(reply)
		if err != nil {
			return nil, err
		}
		out = append(out, snaps...)
		if len(snaps) < page {
			return out, nil
		}
		start = snaps[len(snaps)-1]
	}
}

// GroupSnapshots lists group's snapshots in the order the cluster keeps
// them (by id on Pacific, by creation on newer releases).
func GroupSnapshots(ctx context.Context, ioc *rados.IOContext, group string) ([]GroupSnapInfo, error) {
	o, gid, err := openGroup(ctx, ioc, group)
	if err != nil {
		return nil, err
	}
	recs, err := groupSnapList(ctx, o, gid)
	if err != nil {
		return nil, err
	}
	out := make([]GroupSnapInfo, 0, len(recs))
	for _, r := range recs {
		info := GroupSnapInfo{ID: r.ID, Name: r.Name, State: r.State}
		for _, s := range r.Snaps {
			info.Images = append(info.Images, GroupImageSnap{PoolID: s.PoolID, ImageID: s.ImageID, SnapID: s.SnapID})
		}
		out = append(out, info)
	}
	return out, nil
}

// findGroupSnap resolves group and snapshot names to the group's id and
// the snapshot's record.
func findGroupSnap(ctx context.Context, o objects, group, snap string) (string, cls.GroupSnapshot, error) {
	gid, err := groupID(ctx, o, group)
	if err != nil {
		return "", cls.GroupSnapshot{}, err
	}
	recs, err := groupSnapList(ctx, o, gid)
	if err != nil {
		return "", cls.GroupSnapshot{}, err
	}
	for _, r := range recs {
		if r.Name == snap {
			return gid, r, nil
		}
	}
	return "", cls.GroupSnapshot{}, fmt.Errorf("%w: group snapshot %s@%s", ErrNotFound, group, snap)
}

// groupSnapNamespace is the namespace of the member snapshots of group
// snapshot sid.
func groupSnapNamespace(pool int64, gid, sid string) cls.SnapshotNamespace {
	return cls.SnapshotNamespace{Type: cls.NamespaceGroup,
		Group: cls.GroupSnapshotNamespace{GroupPool: pool, GroupID: gid, GroupSnapshotID: sid}}
}

// snapInNamespace finds the image's snapshot in namespace ns.
func (h *header) snapInNamespace(ns cls.SnapshotNamespace) (snapMeta, bool) {
	for _, s := range h.snaps {
		if s.Namespace.Type == ns.Type && s.Namespace.Group == ns.Group {
			return s, true
		}
	}
	return snapMeta{}, false
}

// openGroupImages opens the images (by pool and id, in the group's
// namespace); on failure it closes those it opened.
func openGroupImages(ctx context.Context, o objects, specs []cls.ImageSnapshotSpec) ([]*Image, error) {
	var imgs []*Image
	for _, s := range specs {
		io, err := o.pool(ctx, s.PoolID, o.namespace())
		var img *Image
		if err == nil {
			name, nerr := imageNameOf(ctx, io, s.ImageID)
			if nerr != nil {
				name = s.ImageID
			}
			img, err = openImage(ctx, io, name, s.ImageID, OpenOptions{})
		}
		if err != nil {
			closeImages(ctx, imgs)
			return nil, fmt.Errorf("rbd: opening group member %s: %w", s.ImageID, err)
		}
		imgs = append(imgs, img)
	}
	return imgs, nil
}

func closeImages(ctx context.Context, imgs []*Image) {
	for _, img := range imgs {
		_ = img.CloseContext(context.WithoutCancel(ctx))
	}
}

// allLocked runs f holding the exclusive lock of every image, writes
// held back on all of them at once; f gets each image's guard.
func allLocked(ctx context.Context, imgs []*Image, guards [][]cls.Method, f func(ctx context.Context, guards [][]cls.Method) error) error {
	if len(imgs) == 0 {
		return f(ctx, guards)
	}
	return imgs[0].exclusive(ctx, func(ctx context.Context, guard []cls.Method) error {
		return allLocked(ctx, imgs[1:], append(guards, guard), f)
	})
}

// CreateGroupSnapshot takes snapshot snap of group: one snapshot of each
// member, all taken while writes to every member are held back.
// ErrExists when the group has a snapshot of that name; on failure the
// member snapshots taken and the record are removed again.
func CreateGroupSnapshot(ctx context.Context, ioc *rados.IOContext, group, snap string) error {
	if err := validSnapName(snap); err != nil {
		return err
	}
	o, gid, err := openGroup(ctx, ioc, group)
	if err != nil {
		return err
	}
	members, err := groupImageList(ctx, o, gid)
	if err != nil {
		return err
	}
	rec := cls.GroupSnapshot{ID: newGroupID(o.instanceID()), Name: snap, State: cls.GroupSnapIncomplete}
	for _, m := range members {
		rec.Snaps = append(rec.Snaps, cls.ImageSnapshotSpec{PoolID: m.Spec.PoolID, ImageID: m.Spec.ImageID})
	}
	ghdr := groupHeaderObject(gid)
	switch err := callWrite(ctx, o, ghdr, cls.GroupSnapSet(rec)); {
	case errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("%w: group snapshot %s@%s", ErrExists, group, snap)
	case err != nil:
		return fmt.Errorf("rbd: recording group snapshot %s@%s: %w", group, snap, err)
	}
	imgs, err := openGroupImages(ctx, o, rec.Snaps)
	if err != nil {
		return errors.Join(err, dropGroupSnapRecord(ctx, o, gid, rec.ID))
	}
	defer closeImages(ctx, imgs)
	ns := groupSnapNamespace(o.poolID(), gid, rec.ID)
	name := groupImageSnapName(o.poolID(), gid, rec.ID)
	err = allLocked(ctx, imgs, nil, func(ctx context.Context, guards [][]cls.Method) error {
		for i, img := range imgs {
			id, err := img.createSnapshotLocked(ctx, name, ns, guards[i])
			if err != nil {
				return err
			}
			rec.Snaps[i].SnapID = id
		}
		return nil
	})
	if err == nil {
		rec.State = cls.GroupSnapComplete
		if err = callWrite(ctx, o, ghdr, cls.GroupSnapSet(rec)); err != nil {
			err = fmt.Errorf("rbd: completing group snapshot %s@%s: %w", group, snap, err)
		}
	}
	if err != nil {
		for _, img := range imgs {
			if rerr := img.removeNamespaceSnap(ctx, ns); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		return errors.Join(err, dropGroupSnapRecord(ctx, o, gid, rec.ID))
	}
	for _, img := range imgs {
		img.notifyHeaderUpdate(ctx)
	}
	return nil
}

// dropGroupSnapRecord removes a group snapshot's record.
func dropGroupSnapRecord(ctx context.Context, o objects, gid, sid string) error {
	err := callWrite(context.WithoutCancel(ctx), o, groupHeaderObject(gid), cls.GroupSnapRemove(sid))
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("rbd: removing group snapshot record %s: %w", sid, err)
	}
	return nil
}

// removeNamespaceSnap removes the image's snapshot in namespace ns, if
// it has one.
func (img *Image) removeNamespaceSnap(ctx context.Context, ns cls.SnapshotNamespace) error {
	removed := false
	err := img.exclusive(ctx, func(ctx context.Context, guard []cls.Method) error {
		s, ok := img.hdr.Load().snapInNamespace(ns)
		if !ok {
			return nil
		}
		removed = true
		return img.removeSnapshotLocked(ctx, s, guard)
	})
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return err
	}
	if removed {
		img.notifyHeaderUpdate(ctx)
	}
	return nil
}

// removeGroupSnapRecord removes a group snapshot as librbd does: the
// member snapshots (those missing are ignored), then the record.
func removeGroupSnapRecord(ctx context.Context, o objects, gid string, rec cls.GroupSnapshot) error {
	imgs, err := openGroupImages(ctx, o, rec.Snaps)
	if err != nil {
		return err
	}
	defer closeImages(ctx, imgs)
	ns := groupSnapNamespace(o.poolID(), gid, rec.ID)
	for _, img := range imgs {
		if err := img.removeNamespaceSnap(ctx, ns); err != nil {
			return err
		}
	}
	err = callWrite(ctx, o, groupHeaderObject(gid), cls.GroupSnapRemove(rec.ID))
	if err != nil {
		return fmt.Errorf("rbd: removing group snapshot %s: %w", rec.Name, err)
	}
	return nil
}

// openGroupSnap adapts ioc and finds snapshot snap of group.
func openGroupSnap(ctx context.Context, ioc *rados.IOContext, group, snap string) (objects, string, cls.GroupSnapshot, error) {
	o, err := adapt(ioc)
	if err != nil {
		return nil, "", cls.GroupSnapshot{}, err
	}
	gid, rec, err := findGroupSnap(ctx, o, group, snap)
	return o, gid, rec, err
}

// RemoveGroupSnapshot removes snapshot snap of group and its member
// snapshots (ErrGroupNotFound, or ErrNotFound for the snapshot).
func RemoveGroupSnapshot(ctx context.Context, ioc *rados.IOContext, group, snap string) error {
	o, gid, rec, err := openGroupSnap(ctx, ioc, group, snap)
	if err != nil {
		return err
	}
	return removeGroupSnapRecord(ctx, o, gid, rec)
}

// RenameGroupSnapshot renames snapshot oldName of group to newName
// (ErrExists when it is taken, or the same).
func RenameGroupSnapshot(ctx context.Context, ioc *rados.IOContext, group, oldName, newName string) error {
	if oldName == newName {
		return fmt.Errorf("%w: group snapshot %s@%s", ErrExists, group, newName)
	}
	if err := validSnapName(newName); err != nil {
		return err
	}
	o, gid, rec, err := openGroupSnap(ctx, ioc, group, oldName)
	if err != nil {
		return err
	}
	rec.Name = newName
	switch err := callWrite(ctx, o, groupHeaderObject(gid), cls.GroupSnapSet(rec)); {
	case errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("%w: group snapshot %s@%s", ErrExists, group, newName)
	case err != nil:
		return fmt.Errorf("rbd: renaming group snapshot %s@%s: %w", group, oldName, err)
	}
	return nil
}

// RollbackGroupSnapshot rolls every member back to its snapshot of
// group snapshot snap, holding all their exclusive locks throughout. A
// member whose snapshot is missing is skipped, as librbd does.
func RollbackGroupSnapshot(ctx context.Context, ioc *rados.IOContext, group, snap string) error {
	o, gid, rec, err := openGroupSnap(ctx, ioc, group, snap)
	if err != nil {
		return err
	}
	imgs, err := openGroupImages(ctx, o, rec.Snaps)
	if err != nil {
		return err
	}
	defer closeImages(ctx, imgs)
	ns := groupSnapNamespace(o.poolID(), gid, rec.ID)
	err = allLocked(ctx, imgs, nil, func(ctx context.Context, guards [][]cls.Method) error {
		for i, img := range imgs {
			s, ok := img.hdr.Load().snapInNamespace(ns)
			if !ok {
				continue
			}
			if err := img.rollbackLocked(ctx, s, guards[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, img := range imgs {
		img.notifyHeaderUpdate(ctx)
	}
	return nil
}

// GroupSnapshotOf returns the names of the group and of the group
// snapshot that image snapshot s (of SnapNamespaceGroup) belongs to, as
// rbd snap ls --all shows them (ErrNotFound when they are gone).
func (img *Image) GroupSnapshotOf(ctx context.Context, s SnapInfo) (group, snap string, err error) {
	if s.Group == nil {
		return "", "", fmt.Errorf("%w: snapshot %d of %q is not a group's", ErrInvalid, s.ID, img.name)
	}
	o, err := img.meta.pool(ctx, s.Group.PoolID, img.meta.namespace())
	if err != nil {
		return "", "", err
	}
	out, err := call(ctx, o, groupDirectoryObject, cls.DirGetName(s.Group.GroupID))
	if errors.Is(err, syscall.ENOENT) {
		return "", "", fmt.Errorf("%w: group id %s", ErrGroupNotFound, s.Group.GroupID)
	}
	if err != nil {
		return "", "", fmt.Errorf("rbd: looking up group id %s: %w", s.Group.GroupID, err)
	}
	if group, err = cls.DecodeString(out); err != nil {
		return "", "", err
	}
	out, err = call(ctx, o, groupHeaderObject(s.Group.GroupID), cls.GroupSnapGetByID(s.Group.GroupSnapID))
	if errors.Is(err, syscall.ENOENT) {
		return "", "", fmt.Errorf("%w: snapshot %s of group %q", ErrNotFound, s.Group.GroupSnapID, group)
	}
	if err != nil {
		return "", "", fmt.Errorf("rbd: reading snapshot %s of group %q: %w", s.Group.GroupSnapID, group, err)
	}
	rec, err := cls.DecodeGroupSnapGetByID(out)
	if err != nil {
		return "", "", err
	}
	return group, rec.Name, nil
}
