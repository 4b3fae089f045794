package rbd

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// Names and ids. An image's id is fixed at creation and names its
// header and data objects; its name can change (Rename). The pool's
// directory maps each to the other, and rbd_id.<name> holds the id.

// ImageID returns the id of image name in the pool and namespace of ioc
// (ErrNotFound when there is no such image).
func ImageID(ctx context.Context, ioc *rados.IOContext, name string) (string, error) {
	o, err := adapt(ioc)
	if err != nil {
		return "", err
	}
	return imageID(ctx, o, name)
}

// ImageName returns the name of the image with the given id in the pool
// and namespace of ioc (ErrNotFound when the directory has no such id).
func ImageName(ctx context.Context, ioc *rados.IOContext, id string) (string, error) {
	o, err := adapt(ioc)
	if err != nil {
		return "", err
	}
	return imageNameOf(ctx, o, id)
}

func imageID(ctx context.Context, o objects, name string) (string, error) {
	out, err := call(ctx, o, idObject(name), cls.GetID())
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return "", fmt.Errorf("%w: image %q", ErrNotFound, name)
		}
		return "", fmt.Errorf("rbd: reading id of %q: %w", name, err)
	}
	return cls.DecodeString(out)
}

func imageNameOf(ctx context.Context, o objects, id string) (string, error) {
	out, err := call(ctx, o, directoryObject, cls.DirGetName(id))
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return "", fmt.Errorf("%w: image id %q", ErrNotFound, id)
		}
		return "", fmt.Errorf("rbd: looking up image id %q in %s: %w", id, directoryObject, err)
	}
	return cls.DecodeString(out)
}

// NamespaceExists reports whether name is an RBD namespace of the pool
// of ioc (`rbd namespace create`); librbd refuses to create images in a
// namespace that is not. The empty name, the pool's default namespace,
// always exists.
func NamespaceExists(ctx context.Context, ioc *rados.IOContext, name string) (bool, error) {
	if name == "" {
		return true, nil
	}
	if ioc == nil {
		return false, fmt.Errorf("%w: nil I/O context", ErrInvalid)
	}
	key := namespaceKeyPrefix + name
	vals, err := ioc.WithNamespace("").OmapGetValsByKeys(ctx, namespaceObject, []string{key})
	if errors.Is(err, rados.ErrNotFound) {
		return false, nil // no namespace was ever created in the pool
	}
	if err != nil {
		return false, fmt.Errorf("rbd: reading %s: %w", namespaceObject, err)
	}
	_, ok := vals[key]
	return ok, nil
}
