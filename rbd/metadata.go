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

// Image metadata: key/value pairs in the header (`rbd image-meta`). The
// methods of Image work on an open image; the functions of the same
// names work on an image by id without opening it (no watch, no lock),
// as a controller that only labels images needs.

// MetadataGet returns the value of key (ErrNotFound when unset).
func (img *Image) MetadataGet(ctx context.Context, key string) (string, error) {
	return metadataGet(ctx, img.meta, img.id, key)
}

// MetadataSet sets key to value.
func (img *Image) MetadataSet(ctx context.Context, key, value string) error {
	if img.readOnly {
		return ErrReadOnly
	}
	if err := metadataSet(ctx, img.meta, img.id, key, value, false); err != nil {
		return err
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// MetadataRemove removes key; a key that is not set is no error, as for
// the class method.
func (img *Image) MetadataRemove(ctx context.Context, key string) error {
	if img.readOnly {
		return ErrReadOnly
	}
	if err := metadataRemove(ctx, img.meta, img.id, key, false); err != nil {
		return err
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// MetadataList returns all metadata.
func (img *Image) MetadataList(ctx context.Context) (map[string]string, error) {
	return metadataList(ctx, img.meta, img.id)
}

// MetadataGet returns the value of key in the metadata of the image with
// the given id in the pool and namespace of ioc (ErrNotFound when unset,
// or when there is no such image).
func MetadataGet(ctx context.Context, ioc *rados.IOContext, imageID, key string) (string, error) {
	o, err := adapt(ioc)
	if err != nil {
		return "", err
	}
	return metadataGet(ctx, o, imageID, key)
}

// MetadataSet sets key to value in the metadata of the image with the
// given id (ErrNotFound when there is no such image), and tells the
// clients that have it open, as Image.MetadataSet does.
func MetadataSet(ctx context.Context, ioc *rados.IOContext, imageID, key, value string) error {
	o, err := adapt(ioc)
	if err != nil {
		return err
	}
	if err := metadataSet(ctx, o, imageID, key, value, true); err != nil {
		return err
	}
	notifyHeaderUpdateOf(ctx, o, imageID)
	return nil
}

// MetadataRemove removes key from the metadata of the image with the
// given id (ErrNotFound when there is no such image; a key that is not
// set is no error), and tells the clients that have it open.
func MetadataRemove(ctx context.Context, ioc *rados.IOContext, imageID, key string) error {
	o, err := adapt(ioc)
	if err != nil {
		return err
	}
	if err := metadataRemove(ctx, o, imageID, key, true); err != nil {
		return err
	}
	notifyHeaderUpdateOf(ctx, o, imageID)
	return nil
}

// MetadataList returns all metadata of the image with the given id
// (ErrNotFound when there is no such image).
func MetadataList(ctx context.Context, ioc *rados.IOContext, imageID string) (map[string]string, error) {
	o, err := adapt(ioc)
	if err != nil {
		return nil, err
	}
	return metadataList(ctx, o, imageID)
}

func metadataGet(ctx context.Context, o objects, id, key string) (string, error) {
	out, err := call(ctx, o, headerObject(id), cls.MetadataGet(key))
	if errors.Is(err, syscall.ENOENT) {
		return "", fmt.Errorf("%w: metadata key %q", ErrNotFound, key)
	}
	if err != nil {
		return "", fmt.Errorf("rbd: metadata_get %q: %w", key, err)
	}
	return cls.DecodeString(out)
}

// metadataSet runs metadata_set, after an assertion that the header
// exists when mustExist (the image is not open: the class method would
// create a header object that no image owns).
func metadataSet(ctx context.Context, o objects, id, key, value string, mustExist bool) error {
	if key == "" {
		return fmt.Errorf("%w: empty metadata key", ErrInvalid)
	}
	err := o.write(ctx, headerObject(id), denc.SnapContext{}, headerWrite(mustExist, cls.MetadataSet(map[string][]byte{key: []byte(value)})))
	if errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%w: image id %q", ErrNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("rbd: metadata_set %q: %w", key, err)
	}
	return nil
}

func metadataRemove(ctx context.Context, o objects, id, key string, mustExist bool) error {
	err := o.write(ctx, headerObject(id), denc.SnapContext{}, headerWrite(mustExist, cls.MetadataRemove(key)))
	if errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%w: image id %q", ErrNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("rbd: metadata_remove %q: %w", key, err)
	}
	return nil
}

func metadataList(ctx context.Context, o objects, id string) (map[string]string, error) {
	out, err := metadataListOf(ctx, o, headerObject(id))
	if errors.Is(err, syscall.ENOENT) {
		return nil, fmt.Errorf("%w: image id %q", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("rbd: metadata_list: %w", err)
	}
	return out, nil
}

// headerWrite is a compound write calling m on a header, after an
// assertion that the header exists when mustExist.
func headerWrite(mustExist bool, m cls.Method) *rados.WriteOp {
	w := rados.NewWriteOp()
	if mustExist {
		w.AssertExists()
	}
	writeCalls(w, m)
	return w
}
