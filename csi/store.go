package csi

import (
	"context"
	"errors"
	"time"
)

// ImageStore is what the controller needs from Ceph: sessions on clusters
// as a given user. The production implementation (package csi/rbdstore)
// sits on packages rados and rbd and caches connections; tests may use
// the in-memory fake in package csi/fakestore.
type ImageStore interface {
	// Session returns a handle on cluster c authenticated as cred.
	// Failing authentication is reported as ErrUnauthenticated.
	Session(ctx context.Context, c Cluster, cred Credentials) (Session, error)
	// Reachable checks, without credentials, that the cluster's
	// monitors answer. Probe uses it when the plugin has no credentials
	// of its own for a cluster.
	Reachable(ctx context.Context, c Cluster) error
}

// Session is the set of RBD and RADOS operations the controller performs
// on one cluster. Every method reports a missing object with an error
// wrapping ErrNotFound, a name already taken with ErrExists, an image
// that cannot be removed because it still has snapshots with
// ErrHasSnapshots, and anything else that cannot be removed because
// something depends on it (clone children, watchers) with ErrBusy.
type Session interface {
	// Ping checks that the session can still talk to the cluster.
	Ping(ctx context.Context) error

	// LookupPool returns the ID of the pool called name.
	LookupPool(ctx context.Context, name string) (int64, error)
	// PoolName returns the name of pool id.
	PoolName(ctx context.Context, id int64) (string, error)
	// RBDPools lists the pools whose application is "rbd".
	RBDPools(ctx context.Context) ([]int64, error)
	// PoolAvailable returns the bytes that can still be written to pool
	// id (Ceph's MAX AVAIL), 0 when the cluster does not know.
	PoolAvailable(ctx context.Context, id int64) (int64, error)

	// CreateImage creates an image of size bytes.
	CreateImage(ctx context.Context, img ImageRef, size uint64, opts ImageOptions) error
	// CloneImage creates child as a clone of the snapshot named snap of
	// parent (clone v2: no snapshot protection needed).
	CloneImage(ctx context.Context, parent ImageRef, snap string, child ImageRef, opts ImageOptions) error
	// StatImage describes an image found by name, or by ID when
	// img.Name is empty.
	StatImage(ctx context.Context, img ImageRef) (ImageInfo, error)
	// ListImages returns the names of the images in a pool's namespace.
	ListImages(ctx context.Context, pool int64, namespace string) ([]string, error)
	// RemoveImage deletes an image that has no snapshots and no watchers.
	// Snapshots ListSnapshots does not show count: RBD's snapshot trash
	// keeps a snapshot removed while clones still need it.
	RemoveImage(ctx context.Context, img ImageRef) error
	// RenameImage gives an image a new name in the same namespace.
	RenameImage(ctx context.Context, img ImageRef, newName string) error
	// ResizeImage sets the size of an image.
	ResizeImage(ctx context.Context, img ImageRef, size uint64) error

	// Metadata returns one image metadata value.
	Metadata(ctx context.Context, img ImageRef, key string) (string, error)
	// SetMetadata sets one image metadata value.
	SetMetadata(ctx context.Context, img ImageRef, key, value string) error

	// CreateSnapshot takes a snapshot of an image's head.
	CreateSnapshot(ctx context.Context, img ImageRef, name string) error
	// ListSnapshots lists an image's user snapshots.
	ListSnapshots(ctx context.Context, img ImageRef) ([]SnapInfo, error)
	// RemoveSnapshot deletes a snapshot. One that clones still need is
	// either refused with ErrBusy or, as librbd does with clone v2, moved
	// to the snapshot trash (gone from ListSnapshots, removed with its
	// last clone); the controller copes with both.
	RemoveSnapshot(ctx context.Context, img ImageRef, name string) error
	// RenameSnapshot renames a snapshot.
	RenameSnapshot(ctx context.Context, img ImageRef, oldName, newName string) error
	// SnapshotExtents calls fn, in offset order from start, for each
	// range of the image as of snapshot snap that holds data (fromSnap
	// empty; a clone's parent data included) or that changed since the
	// earlier snapshot fromSnap (written or discarded), as rbd diff lists
	// them; it returns the size of the image at snap.
	SnapshotExtents(ctx context.Context, img ImageRef, fromSnap, snap string, start uint64, fn func(off, length uint64) error) (size uint64, err error)

	// LockOperation takes the lock of one controller operation on key
	// in a pool's namespace, shared by every replica of the controller:
	// ErrBusy while another holds it. It lasts until release, renewed
	// meanwhile, and expires soon after a holder that died.
	LockOperation(ctx context.Context, pool int64, namespace, key string) (release func(), err error)

	// Reservation reads key from the reservation table of a pool's
	// namespace (one RADOS object holding string keys and values).
	Reservation(ctx context.Context, pool int64, namespace, key string) (string, error)
	// SetReservation writes key in that table.
	SetReservation(ctx context.Context, pool int64, namespace, key, value string) error
	// RemoveReservation deletes key from that table; removing a missing
	// key is not an error.
	RemoveReservation(ctx context.Context, pool int64, namespace, key string) error

	// GroupStore keeps RBD groups and their snapshots
	// (VolumeGroupSnapshots).
	GroupStore

	// OmapStore reads ceph-csi's journal and cleans up the entries of
	// the ceph-csi volumes and snapshots the driver deletes.
	OmapStore
}

// GroupStore is the part of a Session that keeps RBD groups, as librbd's
// group API does: a group lives in one pool's namespace and takes member
// images of that namespace (in any pool); a group snapshot is one
// snapshot of every member, taken while writes to all of them are held
// back, kept in RBD's group snapshot namespace where ListSnapshots does
// not see it.
type GroupStore interface {
	// CreateGroup creates a group (ErrExists when the name is taken).
	CreateGroup(ctx context.Context, g GroupRef) error
	// ListGroups lists the names of the groups of a pool's namespace.
	ListGroups(ctx context.Context, pool int64, namespace string) ([]string, error)
	// RemoveGroup removes a group with its snapshots and memberships.
	RemoveGroup(ctx context.Context, g GroupRef) error
	// AddGroupImage makes img a member of g; an image in another group
	// fails with ErrInGroup, one already in g succeeds.
	AddGroupImage(ctx context.Context, g GroupRef, img ImageRef) error
	// RemoveGroupImage ends img's membership of g (by ID when img.Name
	// is empty); an image in no group succeeds.
	RemoveGroupImage(ctx context.Context, g GroupRef, img ImageRef) error
	// ImageGroup returns the group img belongs to; ok is false for
	// none.
	ImageGroup(ctx context.Context, img ImageRef) (g GroupRef, ok bool, err error)
	// GroupImages lists a group's members, with names and IDs.
	GroupImages(ctx context.Context, g GroupRef) ([]ImageRef, error)
	// GroupSnapshots lists a group's snapshots.
	GroupSnapshots(ctx context.Context, g GroupRef) ([]GroupSnapInfo, error)
	// CreateGroupSnapshot snapshots every member of g at once
	// (ErrExists when g has a snapshot of that name).
	CreateGroupSnapshot(ctx context.Context, g GroupRef, snap string) error
	// RemoveGroupSnapshot removes a group snapshot and its member
	// snapshots; a member snapshot clones still need goes to RBD's
	// snapshot trash, as RemoveSnapshot's does.
	RemoveGroupSnapshot(ctx context.Context, g GroupRef, snap string) error
	// GroupMemberSnapshots lists an image's snapshots that belong to
	// group snapshots, each with its Group set.
	GroupMemberSnapshots(ctx context.Context, img ImageRef) ([]SnapInfo, error)
	// CloneImageFromSnapID is CloneImage of the parent's snapshot of
	// that ID, in any snapshot namespace (a group snapshot's member).
	CloneImageFromSnapID(ctx context.Context, parent ImageRef, snapID uint64, child ImageRef, opts ImageOptions) error
}

// GroupRef names an RBD group.
type GroupRef struct {
	Pool      int64
	Namespace string
	Name      string
}

// GroupSnapInfo describes a group snapshot.
type GroupSnapInfo struct {
	ID       string
	Name     string
	Complete bool // all member snapshots taken; false while taking or after a crash
	Members  []GroupSnapMember
}

// GroupSnapMember is one member image's snapshot in a group snapshot.
type GroupSnapMember struct {
	Pool    int64
	ImageID string
	SnapID  uint64
}

// SnapGroup names the group snapshot an image's snapshot belongs to.
type SnapGroup struct {
	Group     GroupRef
	GroupSnap string // the group snapshot's name
}

// Cluster is one entry of the cluster configuration.
type Cluster struct {
	ID       string
	Monitors []string
	// Namespace is the RADOS namespace volumes go to unless a
	// StorageClass names another ("rbd": {"radosNamespace": ...}).
	Namespace string
	// NetNamespace is a network namespace file ("rbd":
	// {"netNamespaceFilePath": ...}, as ceph-csi's): the node plugin
	// makes its connections to this cluster from inside it.
	NetNamespace string
	// ReadAffinity and CrushLocationLabels are config.json's
	// readAffinity (ceph-csi's): when enabled, the node reads from the
	// OSD nearest to it in CRUSH, its location made from these node
	// labels (overriding --crush-location-labels).
	ReadAffinity        bool
	CrushLocationLabels []string
}

// ImageRef names an image: by Name, or by ID when Name is empty.
type ImageRef struct {
	Pool      int64
	Namespace string
	Name      string
	ID        string
}

// ImageOptions shape a new image.
type ImageOptions struct {
	// Features are RBD feature names ("layering", "exclusive-lock",
	// ...); nil means the store's default set.
	Features []string
	// DataPool names a pool for the image's data objects; empty keeps
	// them in the image's own pool.
	DataPool string
	// Order is log2 of the object size (12 to 25); 0 means the store's
	// default, or for a clone its parent's.
	Order uint8
	// StripeUnit (bytes, dividing the object size) and StripeCount
	// (objects) select RBD striping; 0 means the default (no striping,
	// or for a clone its parent's).
	StripeUnit  uint64
	StripeCount uint64
}

// ImageInfo describes an image.
type ImageInfo struct {
	Name   string
	ID     string
	Size   uint64
	Parent *ParentInfo // nil unless the image is a clone not yet flattened
}

// ParentInfo locates the snapshot a clone was made from.
type ParentInfo struct {
	Pool      int64
	Namespace string
	ImageID   string
	SnapID    uint64
}

// SnapInfo describes a snapshot.
type SnapInfo struct {
	ID      uint64
	Name    string
	Size    uint64
	Created time.Time
	// Group is set for the member snapshots of group snapshots
	// (GroupMemberSnapshots), nil for the others.
	Group *SnapGroup
}

// Errors a Session wraps so the controller can pick gRPC codes.
var (
	ErrNotFound        = errors.New("not found")
	ErrExists          = errors.New("already exists")
	ErrBusy            = errors.New("in use")
	ErrHasSnapshots    = errors.New("has snapshots")
	ErrInGroup         = errors.New("image belongs to a group")
	ErrUnauthenticated = errors.New("authentication failed")
	ErrPermission      = errors.New("permission denied")
	ErrUnsupported     = errors.New("not supported")
	ErrUnavailable     = errors.New("cluster unavailable")
)
