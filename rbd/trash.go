package rbd

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// The image trash: librbd moves an image there (rbd trash mv, or on its
// way to removal) by recording it in the pool's rbd_trash object and
// dropping it from the directory. purerbd reads the trash; it does not
// move images into it or out of it.

// trashObject is RBD_TRASH, the pool (and namespace) trash's record.
const trashObject = "rbd_trash"

// TrashSource says why an image is in the trash.
type TrashSource = cls.TrashSource

// The trash sources.
const (
	TrashSourceUser       = cls.TrashSourceUser
	TrashSourceMirroring  = cls.TrashSourceMirroring
	TrashSourceMigration  = cls.TrashSourceMigration
	TrashSourceRemoving   = cls.TrashSourceRemoving
	TrashSourceUserParent = cls.TrashSourceUserParent
)

// TrashEntry is one image in the trash.
type TrashEntry struct {
	ID     string
	Name   string
	Source TrashSource
	// DeletionTime is when it was moved there; DefermentEnd is when it
	// may be removed from it.
	DeletionTime time.Time
	DefermentEnd time.Time
}

// TrashList returns the images in the trash of ioc's pool and namespace,
// by id.
func TrashList(ctx context.Context, ioc *rados.IOContext) ([]TrashEntry, error) {
	o, err := adapt(ioc)
	if err != nil {
		return nil, err
	}
	return trashList(ctx, o)
}

func trashList(ctx context.Context, o objects) ([]TrashEntry, error) {
	const page = 1024
	var out []TrashEntry
	start := ""
	for {
		reply, err := call(ctx, o, trashObject, cls.TrashList(start, page))
		if errors.Is(err, syscall.ENOENT) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("rbd: listing %s: %w", trashObject, err)
		}
		entries, err := cls.DecodeTrashList(reply)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			out = append(out, TrashEntry{ID: e.ID, Name: e.Spec.Name, Source: e.Spec.Source,
				DeletionTime: e.Spec.DeletionTime.Time(), DefermentEnd: e.Spec.DefermentEndTime.Time()})
		}
		if len(entries) < page {
			return out, nil
		}
		start = entries[len(entries)-1].ID
	}
}
