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
//     and changed through `rbd` class methods (package rbd/internal/cls);
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
// opening it (MetadataGet, MetadataSet, RenameSnapshot, ...), keeps
// advisory locks of the caller's own on an open image's header
// (Image.LockHeader, HeaderLockers, BreakHeaderLock), and keeps groups of
// images as librbd does (rbd_group_directory, rbd_group_header.ID and
// each member's back reference), with their snapshots: one snapshot of
// every member in the group snapshot namespace, taken while all members'
// exclusive locks are held (CreateGroup, AddGroupImage,
// CreateGroupSnapshot, RollbackGroupSnapshot, ...).
//
// An Image is also a block device for package nbd, which this package
// does not import: package nbd/rbdnbd serves it with block status
// (AllocatedExtents), trim (Discard), zeroing (WriteZeroes), flush,
// multi-connection coherence and size notifications.
package rbd
