package rbd

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// Groups, as librbd's api::Group keeps them: the pool's (or namespace's)
// rbd_group_directory maps group names to ids, rbd_group_header.<id>
// lists the member images and the group snapshots, and each member's
// header names its group (rbd_group_ref). A membership is written group
// side first (incomplete), then image side, then marked attached, so
// an interrupted add or remove shows as an incomplete member that a
// later remove cleans up.

const (
	groupDirectoryObject = "rbd_group_directory"
	groupHeaderPrefix    = "rbd_group_header."
)

func groupHeaderObject(id string) string { return groupHeaderPrefix + id }

// Group errors callers tell apart (compare with errors.Is).
var (
	// ErrGroupNotFound: no group of that name (it is also ErrNotFound).
	ErrGroupNotFound = fmt.Errorf("rbd: no such group: %w", ErrNotFound)
	// ErrInGroup: the image belongs to a group (adding it to another
	// fails with it, and with ErrExists, as librbd's EEXIST; removing
	// the image fails with it and EMLINK).
	ErrInGroup = errors.New("rbd: image belongs to a group")
)

// GroupImageState is a member image's link state.
type GroupImageState = cls.GroupImageState

// The link states: attached, or incomplete (an add or remove was
// interrupted, or is under way).
const (
	GroupImageAttached   = cls.GroupImageAttached
	GroupImageIncomplete = cls.GroupImageIncomplete
)

// GroupImage is one member of a group.
type GroupImage struct {
	Name      string
	ID        string
	PoolID    int64
	Pool      string // the pool's name
	Namespace string // the group's, which is every member's
	State     GroupImageState
}

// newGroupID generates a group (or group snapshot) id as librbd does:
// the client's global id in hex followed by 32 random bits in hex.
func newGroupID(instanceID uint64) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatUint(instanceID, 16) + strconv.FormatUint(uint64(binary.LittleEndian.Uint32(b[:])), 16)
}

// openGroup adapts ioc and looks group's ID up in its directory.
func openGroup(ctx context.Context, ioc *rados.IOContext, group string) (objects, string, error) {
	o, err := adapt(ioc)
	if err != nil {
		return nil, "", err
	}
	id, err := groupID(ctx, o, group)
	return o, id, err
}

// groupID looks a group's id up by name.
func groupID(ctx context.Context, o objects, name string) (string, error) {
	out, err := call(ctx, o, groupDirectoryObject, cls.DirGetID(name))
	if errors.Is(err, syscall.ENOENT) {
		return "", fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	}
	if err != nil {
		return "", fmt.Errorf("rbd: looking up group %q: %w", name, err)
	}
	return cls.DecodeString(out)
}

// CreateGroup creates group name in the pool and namespace of ioc
// (ErrExists when there is one of that name).
func CreateGroup(ctx context.Context, ioc *rados.IOContext, name string) error {
	if err := validName(name); err != nil {
		return fmt.Errorf("%w: group name %q", ErrInvalid, name)
	}
	o, err := adapt(ioc)
	if err != nil {
		return err
	}
	id := newGroupID(o.instanceID())
	switch err := callWrite(ctx, o, groupDirectoryObject, cls.GroupDirAdd(name, id)); {
	case errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("%w: group %q", ErrExists, name)
	case err != nil:
		return fmt.Errorf("rbd: adding group %q to %s: %w", name, groupDirectoryObject, err)
	}
	w := rados.NewWriteOp()
	w.Create(true)
	if err := o.write(ctx, groupHeaderObject(id), denc.SnapContext{}, w); err != nil {
		err = fmt.Errorf("rbd: creating the header of group %q: %w", name, err)
		if rerr := callWrite(ctx, o, groupDirectoryObject, cls.GroupDirRemove(name, id)); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return err
	}
	return nil
}

// ListGroups returns the names of the groups of ioc's pool and
// namespace, in name order.
func ListGroups(ctx context.Context, ioc *rados.IOContext) ([]string, error) {
	o, err := adapt(ioc)
	if err != nil {
		return nil, err
	}
	return listNames(ctx, o, groupDirectoryObject, "groups", cls.GroupDirList, func(reply []byte) ([]string, error) {
		entries, err := cls.DecodeGroupDirList(reply)
		names := make([]string, len(entries))
		for i, e := range entries {
			names[i] = e.Name
		}
		return names, err
	})
}

// RenameGroup renames group src to dst within its pool and namespace
// (ErrGroupNotFound, or ErrExists when dst is taken).
func RenameGroup(ctx context.Context, ioc *rados.IOContext, src, dst string) error {
	if err := validName(dst); err != nil {
		return fmt.Errorf("%w: group name %q", ErrInvalid, dst)
	}
	o, id, err := openGroup(ctx, ioc, src)
	if err != nil {
		return err
	}
	switch err := callWrite(ctx, o, groupDirectoryObject, cls.GroupDirRename(src, dst, id)); {
	case errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("%w: group %q", ErrExists, dst)
	case err != nil && !errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("rbd: renaming group %q to %q: %w", src, dst, err)
	}
	return nil
}

// RemoveGroup removes group name as librbd does: its snapshots (with
// their image snapshots), then its members' links, its header and its
// directory entry. ErrGroupNotFound when there is no such group.
func RemoveGroup(ctx context.Context, ioc *rados.IOContext, name string) error {
	o, id, err := openGroup(ctx, ioc, name)
	if err != nil {
		return err
	}
	snaps, err := groupSnapList(ctx, o, id)
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return err
	}
	for _, s := range snaps {
		if err := removeGroupSnapRecord(ctx, o, id, s); err != nil {
			return err
		}
	}
	members, err := groupImageList(ctx, o, id)
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return err
	}
	for _, m := range members {
		io, err := o.pool(ctx, m.Spec.PoolID, o.namespace())
		if err != nil {
			return err
		}
		if err := unlinkGroupImage(ctx, o, id, io, m.Spec.ImageID); err != nil && !errors.Is(err, syscall.ENOENT) {
			return err
		}
	}
	if err := deleteObject(ctx, o, groupHeaderObject(id), denc.SnapContext{}); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("rbd: removing the header of group %q: %w", name, err)
	}
	err = callWrite(ctx, o, groupDirectoryObject, cls.GroupDirRemove(name, id))
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("rbd: removing group %q from %s: %w", name, groupDirectoryObject, err)
	}
	return nil
}

// groupImageList lists a group's members as its header records them.
func groupImageList(ctx context.Context, o objects, id string) ([]cls.GroupImageStatus, error) {
	const page = 1024
	var out []cls.GroupImageStatus
	start := cls.GroupImageListStart
	for {
		reply, err := call(ctx, o, groupHeaderObject(id), cls.GroupImageList(start, page))
		if err != nil {
			return nil, fmt.Errorf("rbd: listing the images of group %s: %w", id, err)
		}
		members, err := cls.DecodeGroupImageList(reply)
		if err != nil {
			return nil, err
		}
		out = append(out, members...)
		if len(members) < page {
			return out, nil
		}
		start = members[len(members)-1].Spec
	}
}

// directoryID looks an image's id up in the directory, as librbd's
// group calls do.
func directoryID(ctx context.Context, o objects, name string) (string, error) {
	out, err := call(ctx, o, directoryObject, cls.DirGetID(name))
	if errors.Is(err, syscall.ENOENT) {
		return "", fmt.Errorf("%w: image %q", ErrNotFound, name)
	}
	if err != nil {
		return "", fmt.Errorf("rbd: looking up image %q: %w", name, err)
	}
	return cls.DecodeString(out)
}

// sameNamespace refuses a group and an image in different namespaces,
// which librbd does not link.
func sameNamespace(gioc, iioc *rados.IOContext) error {
	if gioc == nil || iioc == nil {
		return fmt.Errorf("%w: nil I/O context", ErrInvalid)
	}
	if gioc.Namespace() != iioc.Namespace() {
		return fmt.Errorf("%w: group and image namespaces differ (%q, %q)", ErrInvalid, gioc.Namespace(), iioc.Namespace())
	}
	return nil
}

// groupAndImage checks that group (of gioc) and image (of iioc) share a
// namespace and looks up both IDs.
func groupAndImage(ctx context.Context, gioc *rados.IOContext, group string, iioc *rados.IOContext, image string) (o objects, gid string, io objects, iid string, err error) {
	if err := sameNamespace(gioc, iioc); err != nil {
		return nil, "", nil, "", err
	}
	o, _ = adapt(gioc)
	io, _ = adapt(iioc)
	if gid, err = groupID(ctx, o, group); err != nil {
		return nil, "", nil, "", err
	}
	if iid, err = directoryID(ctx, io, image); err != nil {
		return nil, "", nil, "", err
	}
	return o, gid, io, iid, nil
}

// AddGroupImage adds image (of iioc's pool, in the group's namespace) to
// group (of gioc's pool and namespace). An image in another group fails
// with ErrInGroup and ErrExists; one already in this group succeeds.
func AddGroupImage(ctx context.Context, gioc *rados.IOContext, group string, iioc *rados.IOContext, image string) error {
	o, gid, io, iid, err := groupAndImage(ctx, gioc, group, iioc, image)
	if err != nil {
		return err
	}
	spec := cls.GroupImageSpec{ImageID: iid, PoolID: io.poolID()}
	ghdr := groupHeaderObject(gid)
	if err := callWrite(ctx, o, ghdr, cls.GroupImageSet(cls.GroupImageStatus{Spec: spec, State: cls.GroupImageIncomplete})); err != nil {
		return fmt.Errorf("rbd: adding image %q to group %q: %w", image, group, err)
	}
	err = callWrite(ctx, io, headerObject(iid), cls.ImageGroupAdd(cls.GroupSpec{PoolID: o.poolID(), GroupID: gid}))
	if err != nil {
		_ = callWrite(ctx, o, ghdr, cls.GroupImageRemove(spec)) // as librbd: errors of the undo ignored
		if errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("%w: %w: image %q", ErrInGroup, ErrExists, image)
		}
		return fmt.Errorf("rbd: linking image %q to group %q: %w", image, group, err)
	}
	notifyHeaderUpdateOf(ctx, io, iid)
	if err := callWrite(ctx, o, ghdr, cls.GroupImageSet(cls.GroupImageStatus{Spec: spec, State: cls.GroupImageAttached})); err != nil {
		return fmt.Errorf("rbd: attaching image %q to group %q: %w", image, group, err)
	}
	return nil
}

// RemoveGroupImage removes image (of iioc's pool) from group. An image
// that is in no group succeeds, as with librbd; one in another group
// fails (EBADF).
func RemoveGroupImage(ctx context.Context, gioc *rados.IOContext, group string, iioc *rados.IOContext, image string) error {
	o, gid, io, iid, err := groupAndImage(ctx, gioc, group, iioc, image)
	if err != nil {
		return err
	}
	return unlinkGroupImage(ctx, o, gid, io, iid)
}

// RemoveGroupImageByID is RemoveGroupImage for an image named by id
// (one whose name is gone, say).
func RemoveGroupImageByID(ctx context.Context, gioc *rados.IOContext, group string, iioc *rados.IOContext, imageID string) error {
	if gioc == nil || iioc == nil {
		return fmt.Errorf("%w: nil I/O context", ErrInvalid)
	}
	o, _ := adapt(gioc)
	io, _ := adapt(iioc)
	gid, err := groupID(ctx, o, group)
	if err != nil {
		return err
	}
	return unlinkGroupImage(ctx, o, gid, io, imageID)
}

// unlinkGroupImage undoes a membership in librbd's order: incomplete on
// the group side, the image's reference, then the group's record.
func unlinkGroupImage(ctx context.Context, o objects, gid string, io objects, iid string) error {
	spec := cls.GroupImageSpec{ImageID: iid, PoolID: io.poolID()}
	ghdr := groupHeaderObject(gid)
	if err := callWrite(ctx, o, ghdr, cls.GroupImageSet(cls.GroupImageStatus{Spec: spec, State: cls.GroupImageIncomplete})); err != nil {
		return fmt.Errorf("rbd: marking image %s incomplete in group %s: %w", iid, gid, err)
	}
	err := callWrite(ctx, io, headerObject(iid), cls.ImageGroupRemove(cls.GroupSpec{PoolID: o.poolID(), GroupID: gid}))
	switch {
	case err == nil:
		notifyHeaderUpdateOf(ctx, io, iid)
	case !errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("rbd: unlinking image %s from group %s: %w", iid, gid, err)
	}
	if err := callWrite(ctx, o, ghdr, cls.GroupImageRemove(spec)); err != nil {
		return fmt.Errorf("rbd: removing image %s from group %s: %w", iid, gid, err)
	}
	return nil
}

// GroupImages lists group's members in the header's order (by pool, then
// image id). An image whose name cannot be found fails the listing, as
// with librbd.
func GroupImages(ctx context.Context, ioc *rados.IOContext, group string) ([]GroupImage, error) {
	o, gid, err := openGroup(ctx, ioc, group)
	if err != nil {
		return nil, err
	}
	members, err := groupImageList(ctx, o, gid)
	if err != nil {
		return nil, err
	}
	out := make([]GroupImage, 0, len(members))
	for _, m := range members {
		io, err := o.pool(ctx, m.Spec.PoolID, o.namespace())
		if err != nil {
			return nil, err
		}
		name, err := imageNameOf(ctx, io, m.Spec.ImageID)
		if err != nil {
			return nil, err
		}
		out = append(out, GroupImage{Name: name, ID: m.Spec.ImageID, PoolID: m.Spec.PoolID,
			Pool: ioc.Conn().OSDMap().PoolNames[m.Spec.PoolID], Namespace: o.namespace(), State: m.State})
	}
	return out, nil
}

// ImageGroup names the group an image belongs to.
type ImageGroup struct {
	PoolID int64
	Name   string
}

// Group returns the group the image belongs to; ok is false when it
// belongs to none.
func (img *Image) Group(ctx context.Context) (g ImageGroup, ok bool, err error) {
	out, err := call(ctx, img.meta, headerObject(img.id), cls.ImageGroupGet())
	if optional(err) == nil && err != nil {
		return g, false, nil
	}
	if err != nil {
		return g, false, fmt.Errorf("rbd: reading the group of %q: %w", img.name, err)
	}
	spec, err := cls.DecodeImageGroupGet(out)
	if err != nil || !spec.Valid() {
		return g, false, err
	}
	o, err := img.meta.pool(ctx, spec.PoolID, img.meta.namespace())
	if err != nil {
		return g, false, err
	}
	out, err = call(ctx, o, groupDirectoryObject, cls.DirGetName(spec.GroupID))
	if err != nil {
		return g, false, fmt.Errorf("rbd: looking up group %s of %q: %w", spec.GroupID, img.name, err)
	}
	name, err := cls.DecodeString(out)
	if err != nil {
		return g, false, err
	}
	return ImageGroup{PoolID: spec.PoolID, Name: name}, true, nil
}
