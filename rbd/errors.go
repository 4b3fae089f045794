package rbd

import (
	"errors"
	"fmt"
)

// Errors callers tell apart (compare with errors.Is).
var (
	// ErrNotFound: the image (or snapshot) does not exist.
	ErrNotFound = errors.New("rbd: no such image or snapshot")
	// ErrExists: an image or snapshot of that name exists.
	ErrExists = errors.New("rbd: image or snapshot already exists")
	// ErrUnsupportedFeature: the image has a feature this package does
	// not implement for the requested access (the error names it).
	ErrUnsupportedFeature = errors.New("rbd: unsupported image feature")
	// ErrReadOnly: a write to an image opened read-only or at a snapshot.
	ErrReadOnly = errors.New("rbd: image is read-only")
	// ErrOutOfRange: I/O beyond the end of the image.
	ErrOutOfRange = errors.New("rbd: I/O beyond the end of the image")
	// ErrHasSnapshots: removal of an image that has snapshots.
	ErrHasSnapshots = errors.New("rbd: image has snapshots")
	// ErrHasChildren: removal of an image or snapshot that has clones.
	ErrHasChildren = errors.New("rbd: image or snapshot has children")
	// ErrBusy: the image is in use (watched by another client, or its
	// lock is held by a client that will not release it).
	ErrBusy = errors.New("rbd: image is busy")
	// ErrLockedExternally: the exclusive lock is held by something other
	// than a librbd-compatible client (a lock taken with `rbd lock add`).
	ErrLockedExternally = errors.New("rbd: image locked by an external application")
	// ErrProtected: the snapshot is protected.
	ErrProtected = errors.New("rbd: snapshot is protected")
	// ErrClosed: the image was closed.
	ErrClosed = errors.New("rbd: image closed")
	// ErrInvalid: invalid arguments.
	ErrInvalid = errors.New("rbd: invalid argument")
)

// FeatureError reports an image feature this package refuses.
type FeatureError struct {
	Image    string
	Features Feature
	Access   string // "read-only" or "read-write"
}

func (e *FeatureError) Error() string {
	return fmt.Sprintf("rbd: image %q has feature(s) %s, which purerbd does not support for %s access",
		e.Image, e.Features, e.Access)
}

// Unwrap returns ErrUnsupportedFeature.
func (e *FeatureError) Unwrap() error { return ErrUnsupportedFeature }
