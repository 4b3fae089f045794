// Package rbd implements RBD image format 2 on top of RADOS, on disk
// exactly as librbd lays it out, so that images written here are read by
// librbd, krbd and rbd-nbd identically, and the reverse.
//
// An image named NAME with id ID is made of:
//
//   - rbd_id.NAME, holding ID (class method rbd.get_id);
//   - an entry NAME <-> ID in the pool's rbd_directory;
//   - rbd_header.ID, whose omap holds size, order, features, object
//     prefix, striping, snapshots, parent, flags and metadata, all read
//     and changed through `rbd` class methods (package rbd/cls);
//   - data objects rbd_data.ID.%016x (object number), in the data pool
//     when the image has one;
//   - with the object-map feature, rbd_object_map.ID (and
//     rbd_object_map.ID.SNAPID per snapshot): one 2-bit state per data
//     object (package rbd/objectmap).
//
// Byte ranges map onto data objects by Ceph's striping rules (package
// rbd/striper). Writes carry the image's snapshot context so that the OSDs
// preserve snapshot data. With the exclusive-lock feature a writer first
// takes the `lock` class lock "rbd_lock" on the header with cookie
// "auto <watch handle>" and tag "internal", announces it to the header's
// watchers and hands it over when another librbd client asks (package
// rbd/watchnotify); with the object-map feature it marks an object as
// existing in the map before writing to it.
//
// Images with features this package does not implement are refused with
// an error naming the feature (ErrUnsupportedFeature), never silently
// written.
//
// Callers need not know this layout: besides opening images, the package
// looks names and ids up (ImageID, ImageName, NamespaceExists), reads and
// writes metadata and renames snapshots of an image by id without
// opening it (MetadataGet, MetadataSet, RenameSnapshot, ...), and keeps
// advisory locks of the caller's own on an open image's header
// (Image.LockHeader, HeaderLockers, BreakHeaderLock).
//
// An Image is also a block device for package nbd, which this package
// does not import: package nbd/rbdnbd serves it with block status
// (AllocatedExtents), trim (Discard), zeroing (WriteZeroes), flush,
// multi-connection coherence and size notifications.
package rbd

import (
	"errors"
	"fmt"
	"strings"
)

// Feature is an RBD image feature bit (RBD_FEATURE_*).
type Feature uint64

// Image features.
const (
	FeatureLayering      Feature = 1 << 0
	FeatureStripingV2    Feature = 1 << 1
	FeatureExclusiveLock Feature = 1 << 2
	FeatureObjectMap     Feature = 1 << 3
	FeatureFastDiff      Feature = 1 << 4
	FeatureDeepFlatten   Feature = 1 << 5
	FeatureJournaling    Feature = 1 << 6
	FeatureDataPool      Feature = 1 << 7
	FeatureOperations    Feature = 1 << 8
	FeatureMigrating     Feature = 1 << 9
	FeatureNonPrimary    Feature = 1 << 10
	FeatureDirtyCache    Feature = 1 << 11
)

// DefaultFeatures are librbd's default (rbd_default_features = 61):
// layering, exclusive-lock, object-map, fast-diff, deep-flatten.
const DefaultFeatures = FeatureLayering | FeatureExclusiveLock | FeatureObjectMap | FeatureFastDiff | FeatureDeepFlatten

// FeatureNone asks Create for an image without any feature (a zero
// Features field means DefaultFeatures).
const FeatureNone Feature = 1 << 63

var featureNames = []struct {
	f    Feature
	name string
}{
	{FeatureLayering, "layering"},
	{FeatureStripingV2, "striping"},
	{FeatureExclusiveLock, "exclusive-lock"},
	{FeatureObjectMap, "object-map"},
	{FeatureFastDiff, "fast-diff"},
	{FeatureDeepFlatten, "deep-flatten"},
	{FeatureJournaling, "journaling"},
	{FeatureDataPool, "data-pool"},
	{FeatureOperations, "operations"},
	{FeatureMigrating, "migrating"},
	{FeatureNonPrimary, "non-primary"},
	{FeatureDirtyCache, "dirty-cache"},
}

// Names lists the features set in f by the names `rbd info` prints.
func (f Feature) Names() []string {
	var out []string
	for _, n := range featureNames {
		if f&n.f != 0 {
			out = append(out, n.name)
			f &^= n.f
		}
	}
	for b := 0; f != 0 && b < 64; b++ {
		if f&(1<<b) != 0 {
			out = append(out, fmt.Sprintf("unknown-%d", b))
			f &^= 1 << b
		}
	}
	return out
}

func (f Feature) String() string { return strings.Join(f.Names(), ", ") }

// ParseFeatures parses a comma-separated feature list as `rbd create
// --image-feature` takes it (names or a number).
func ParseFeatures(s string) (Feature, error) {
	var f Feature
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		found := false
		for _, n := range featureNames {
			if n.name == part {
				f |= n.f
				found = true
			}
		}
		if !found {
			var v uint64
			if _, err := fmt.Sscan(part, &v); err != nil {
				return 0, fmt.Errorf("rbd: unknown image feature %q", part)
			}
			f |= Feature(v)
		}
	}
	return f, nil
}

// Features this package can write with.
const supportedWriteFeatures = FeatureLayering | FeatureStripingV2 | FeatureExclusiveLock |
	FeatureObjectMap | FeatureFastDiff | FeatureDeepFlatten | FeatureDataPool | FeatureOperations

// Features this package can read with (read-only opens).
const supportedReadFeatures = supportedWriteFeatures | FeatureJournaling | FeatureNonPrimary

// Operation features (op_features_get), set with FeatureOperations.
const (
	OpFeatureCloneParent uint64 = 1 << 0
	OpFeatureCloneChild  uint64 = 1 << 1
	OpFeatureGroup       uint64 = 1 << 2
	OpFeatureSnapTrash   uint64 = 1 << 3
)

const supportedOpFeatures = OpFeatureCloneParent | OpFeatureCloneChild | OpFeatureGroup | OpFeatureSnapTrash

// Image flags (get_flags).
const (
	FlagObjectMapInvalid uint64 = 1 << 0
	FlagFastDiffInvalid  uint64 = 1 << 1
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
