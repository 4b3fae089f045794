package rbd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// RenameSnapshot renames snapshot oldName of the image with the given id
// in the pool and namespace of ioc to newName, without opening the image:
// the header's class method renames it in one step, so neither the
// header watch nor the exclusive lock is needed. Clients that have the
// image open are told to re-read its header. ErrNotFound when there is
// no such image or snapshot, ErrExists when newName is taken.
func RenameSnapshot(ctx context.Context, ioc *rados.IOContext, imageID, oldName, newName string) error {
	if newName == "" || strings.ContainsAny(newName, "/@") {
		return fmt.Errorf("%w: snapshot name %q", ErrInvalid, newName)
	}
	o, err := adapt(ioc)
	if err != nil {
		return err
	}
	h, err := loadHeader(ctx, o, imageID, true)
	if err != nil {
		return err
	}
	s, ok := h.snapByName(oldName)
	if !ok {
		return fmt.Errorf("%w: snapshot %q of image %s", ErrNotFound, oldName, imageID)
	}
	if _, ok := h.snapByName(newName); ok {
		return fmt.Errorf("%w: snapshot %q of image %s", ErrExists, newName, imageID)
	}
	err = callWrite(ctx, o, headerObject(imageID), cls.SnapshotRename(s.ID, newName))
	switch {
	case errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("%w: snapshot %q of image %s", ErrExists, newName, imageID)
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%w: snapshot %q of image %s", ErrNotFound, oldName, imageID)
	case err != nil:
		return fmt.Errorf("rbd: renaming snapshot %q of image %s: %w", oldName, imageID, err)
	}
	notifyHeaderUpdateOf(ctx, o, imageID)
	return nil
}
