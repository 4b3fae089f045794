package rbd

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/purerbd/purerbd/rbd/cls"
)

// Image metadata: key/value pairs in the header (`rbd image-meta`).

// MetadataGet returns the value of key (ErrNotFound when unset).
func (img *Image) MetadataGet(ctx context.Context, key string) (string, error) {
	out, err := call(ctx, img.meta, headerObject(img.id), cls.MetadataGet(key))
	if errors.Is(err, syscall.ENOENT) {
		return "", fmt.Errorf("%w: metadata key %q", ErrNotFound, key)
	}
	if err != nil {
		return "", fmt.Errorf("rbd: metadata_get %q: %w", key, err)
	}
	return cls.DecodeString(out)
}

// MetadataSet sets key to value.
func (img *Image) MetadataSet(ctx context.Context, key, value string) error {
	if img.readOnly {
		return ErrReadOnly
	}
	if key == "" {
		return fmt.Errorf("%w: empty metadata key", ErrInvalid)
	}
	if err := callWrite(ctx, img.meta, headerObject(img.id), cls.MetadataSet(map[string][]byte{key: []byte(value)})); err != nil {
		return fmt.Errorf("rbd: metadata_set %q: %w", key, err)
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// MetadataRemove removes key (ErrNotFound when unset).
func (img *Image) MetadataRemove(ctx context.Context, key string) error {
	if img.readOnly {
		return ErrReadOnly
	}
	err := callWrite(ctx, img.meta, headerObject(img.id), cls.MetadataRemove(key))
	if errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%w: metadata key %q", ErrNotFound, key)
	}
	if err != nil {
		return fmt.Errorf("rbd: metadata_remove %q: %w", key, err)
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// MetadataList returns all metadata, by key.
func (img *Image) MetadataList(ctx context.Context) ([]cls.KeyValue, error) {
	var out []cls.KeyValue
	start := ""
	for {
		reply, err := call(ctx, img.meta, headerObject(img.id), cls.MetadataList(start, 512))
		if err != nil {
			return nil, fmt.Errorf("rbd: metadata_list: %w", err)
		}
		kvs, err := cls.DecodeMetadataList(reply)
		if err != nil {
			return nil, err
		}
		out = append(out, kvs...)
		if len(kvs) < 512 {
			return out, nil
		}
		start = kvs[len(kvs)-1].Key
	}
}
