package rbd

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// RBD namespaces, as librbd's api::Namespace keeps them: the pool's
// rbd_namespace object (default namespace) lists them, and each has its
// own directory, marked ready for images when the namespace is created
// and closed to new ones while it is removed.

// The objects librbd may keep in a namespace besides images', removed
// with it.
var namespaceObjects = []string{childrenObject, "rbd_group_directory", "rbd_info", mirroringObject,
	"rbd_task", trashObject, directoryObject}

// mirroringObject records a pool's (or namespace's) mirroring mode.
const mirroringObject = "rbd_mirroring"

// CreateNamespace creates namespace name in ioc's pool (ioc's own
// namespace is ignored). ErrExists when it exists.
func CreateNamespace(ctx context.Context, ioc *rados.IOContext, name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty namespace name", ErrInvalid)
	}
	if ioc == nil {
		return fmt.Errorf("%w: nil I/O context", ErrInvalid)
	}
	def, err := adapt(ioc.WithNamespace(""))
	if err != nil {
		return err
	}
	switch err := callWrite(ctx, def, namespaceObject, cls.NamespaceAdd(name)); {
	case errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("%w: namespace %q", ErrExists, name)
	case err != nil:
		return fmt.Errorf("rbd: adding namespace %q: %w", name, err)
	}
	ns, err := adapt(ioc.WithNamespace(name))
	if err != nil {
		return err
	}
	if err := callWrite(ctx, ns, directoryObject, cls.DirStateSet(cls.DirectoryReady)); err != nil {
		// undo as librbd does: the directory, then the name
		if rerr := deleteObject(ctx, ns, directoryObject, denc.SnapContext{}); rerr != nil && !errors.Is(rerr, syscall.ENOENT) {
			err = errors.Join(err, rerr)
		}
		if rerr := callWrite(ctx, def, namespaceObject, cls.NamespaceRemove(name)); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("rbd: initializing the directory of namespace %q: %w", name, err)
	}
	return nil
}

// RemoveNamespace removes namespace name of ioc's pool, which must hold
// no image, in its directory or its trash (ErrBusy otherwise).
// ErrNotFound when there is no such namespace. A namespace with
// mirroring enabled is refused (ErrUnsupportedFeature): librbd would
// disable mirroring first, which purerbd does not implement.
func RemoveNamespace(ctx context.Context, ioc *rados.IOContext, name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty namespace name", ErrInvalid)
	}
	if ioc == nil {
		return fmt.Errorf("%w: nil I/O context", ErrInvalid)
	}
	def, err := adapt(ioc.WithNamespace(""))
	if err != nil {
		return err
	}
	ns, err := adapt(ioc.WithNamespace(name))
	if err != nil {
		return err
	}
	// close the directory to new images and remove it, atomically,
	// unless it lists some (EBUSY)
	w := newWrite(cls.DirStateSet(cls.DirectoryAddDisabled))
	w.Remove()
	err = ns.write(ctx, directoryObject, denc.SnapContext{}, w)
	busy := errors.Is(err, syscall.EBUSY)
	if err != nil && !busy && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("rbd: disabling namespace %q: %w", name, err)
	}
	if !busy {
		trash, err := call(ctx, ns, trashObject, cls.TrashList("", 1))
		switch {
		case err == nil:
			entries, derr := cls.DecodeTrashList(trash)
			if derr != nil {
				return derr
			}
			busy = len(entries) > 0
		case !errors.Is(err, syscall.ENOENT):
			return fmt.Errorf("rbd: listing the trash of namespace %q: %w", name, err)
		}
	}
	if !busy {
		mode, err := call(ctx, ns, mirroringObject, cls.MirrorModeGet())
		if err == nil {
			if m, derr := cls.DecodeMirrorModeGet(mode); derr != nil || m != 0 {
				err = fmt.Errorf("%w: namespace %q has mirroring enabled", ErrUnsupportedFeature, name)
				return errors.Join(err, reopenDirectory(ctx, ns))
			}
		} else if !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rbd: reading the mirroring mode of namespace %q: %w", name, err)
		}
	}
	if busy {
		return errors.Join(fmt.Errorf("rbd: namespace %q holds images: %w", name, ErrBusy), reopenDirectory(ctx, ns))
	}
	for _, oid := range namespaceObjects {
		if err := deleteObject(ctx, ns, oid, denc.SnapContext{}); err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rbd: removing %s of namespace %q: %w", oid, name, err)
		}
	}
	switch err := callWrite(ctx, def, namespaceObject, cls.NamespaceRemove(name)); {
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%w: namespace %q", ErrNotFound, name)
	case err != nil:
		return fmt.Errorf("rbd: removing namespace %q: %w", name, err)
	}
	return nil
}

// reopenDirectory lets images be added to a namespace again after a
// removal that found it in use.
func reopenDirectory(ctx context.Context, ns objects) error {
	if err := callWrite(ctx, ns, directoryObject, cls.DirStateSet(cls.DirectoryReady)); err != nil {
		return fmt.Errorf("rbd: restoring the directory state: %w", err)
	}
	return nil
}

// ListNamespaces returns the RBD namespaces of ioc's pool, by name.
func ListNamespaces(ctx context.Context, ioc *rados.IOContext) ([]string, error) {
	if ioc == nil {
		return nil, fmt.Errorf("%w: nil I/O context", ErrInvalid)
	}
	def, err := adapt(ioc.WithNamespace(""))
	if err != nil {
		return nil, err
	}
	return listNames(ctx, def, namespaceObject, "namespaces", cls.NamespaceList, cls.DecodeNamespaceList)
}

// listNames pages through a name-keyed listing of object oid with the
// cls method list (start after a name, at most max) and its decoder; a
// missing object lists nothing.
func listNames(ctx context.Context, o objects, oid, what string, list func(start string, max uint64) cls.Method,
	decode func([]byte) ([]string, error)) ([]string, error) {
	const page = 1024
	var out []string
	start := ""
	for {
		reply, err := call(ctx, o, oid, list(start, page))
		if errors.Is(err, syscall.ENOENT) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("rbd: listing %s: %w", what, err)
		}
		names, err := decode(reply)
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
		if len(names) < page {
			return out, nil
		}
		start = names[len(names)-1]
	}
}
