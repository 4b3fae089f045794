package rbd

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ParentData supplies the bytes a clone shows where it still shares its
// parent's data: len(p) bytes at image offset off, all within the
// parent overlap. A layer above the image that transforms the data on
// the way (the encryption of a clone formatted with a key of its own,
// as librbd's crypto layer reads a parent through the parent's key and
// copies it up under the clone's) installs one with SetParentData; the
// image then uses it for reads of objects it does not have and for
// copy-ups alike, so what a read shows is what a copy-up writes.
type ParentData func(ctx context.Context, p []byte, off int64) error

// SetParentData makes the clone take its parent's bytes from fn instead
// of reading the parent snapshot as it is; nil restores the plain read.
// Set it before the image serves I/O.
func (img *Image) SetParentData(fn ParentData) {
	if fn == nil {
		img.parentData.Store(nil)
		return
	}
	img.parentData.Store(&fn)
}

// ParentImage returns the parent snapshot a clone reads through, open
// read-only, or nil for an image that is not (or no longer) a clone. It
// stays open as long as the image; closing the image closes it.
func (img *Image) ParentImage() *Image {
	if img.parent == nil || img.hdr.Load().parent == nil {
		return nil
	}
	return img.parent
}

// readParent fills p with the clone's parent bytes at image offset off
// (within the overlap): through the installed ParentData, or from the
// parent snapshot, zeros past its end.
func (img *Image) readParent(ctx context.Context, p []byte, off int64) error {
	if fn := img.parentData.Load(); fn != nil {
		if err := (*fn)(ctx, p, off); err != nil {
			return fmt.Errorf("rbd: parent data of %q at %d: %w", img.name, off, err)
		}
		return nil
	}
	got, err := img.parent.ReadAtContext(ctx, p, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("rbd: reading parent of %q: %w", img.name, err)
	}
	clear(p[got:])
	return nil
}
