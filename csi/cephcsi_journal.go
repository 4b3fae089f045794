package csi

// ceph-csi's RBD journal, read to find the image behind a ceph-csi
// handle (cephcsi_id.go) and, when such a volume or snapshot is deleted,
// cleaned up exactly as ceph-csi cleans it up. Nothing else in it is
// ever written: ceph-csi must be able to take the volumes back.
//
// What purerbd relies on, from ceph/ceph-csi internal/journal/voljournal.go
// (NewCSIVolumeJournal, NewCSISnapshotJournal, ReserveName,
// GetImageAttributes, UndoReservation) and internal/rbd/rbd_util.go
// (generateVolumeFromVolumeID, genSnapFromSnapID):
//
//   - All objects live in the RADOS namespace of the cluster's
//     "radosNamespace" (config.json), like the images.
//   - A directory object per journal pool and instance ID (ceph-csi's
//     --instanceid, "default" unless set): "csi.volumes.<instance>" for
//     volumes, "csi.snaps.<instance>" for snapshots. Its omap maps
//     "csi.volume.<CO name>" (snapshots: "csi.snap.<CO name>") to the
//     entry's UUID, or to "<image pool ID, 16 hex>/<UUID>" when the
//     journal pool is not the image pool.
//   - A per-entry object in the handle's pool, "csi.volume.<UUID>"
//     (snapshots: "csi.snap.<UUID>"), whose omap holds "csi.volname"
//     (snapshots "csi.snapname": the CO name), "csi.imagename" (the RBD
//     image; when absent, from volumes made before the key existed, it is
//     "csi-vol-<UUID>" or "csi-snap-<UUID>"), "csi.imageid",
//     "csi.journalpool" (the journal pool's ID as 16 hex digits, only
//     when it is not the image pool), "csi.source" (snapshots: the source
//     image's name), "csi.volume.owner", "csi.volume.encryptKMS" and
//     "csi.volume.encryptionType" (encrypted volumes), "csi.groupid" and
//     "csi.volume.backingsnapshotid".
//   - A ceph-csi snapshot is an image of its own, "csi-snap-<UUID>" (a
//     clone of the source volume, possibly flattened), carrying one RBD
//     snapshot with the same name (internal/rbd/controllerserver.go,
//     doSnapshotClone; internal/rbd/snapshot.go, toVolume).
//   - A volume ceph-csi cloned from a volume hangs from an intermediate
//     clone NAME-temp (internal/rbd/clone.go, generateTempClone), which
//     its DeleteVolume removes with it (DeleteTempImage).
//   - Deleting removes the image, then the per-entry object, then the
//     directory key (UndoReservation: "inverse of create order").
//   - With a "journalPool" StorageClass parameter naming another pool
//     than "pool", ReserveName creates the per-entry object in the image
//     pool but writes its keys into an object of the same name in the
//     journal pool, while GetImageAttributes reads the image pool's: the
//     entry then reads as empty, the image name falls back on the
//     default and the journal pool on the image pool. purerbd reads it
//     the same way, and so finds what ceph-csi finds (and deletes what
//     it deletes); the keys in the journal pool stay, as with ceph-csi.
//
// purerbd trusts a journal entry only when its per-entry object exists
// (ceph-csi would fall back on the default image name without it; a
// volume whose journal is gone is NOT_FOUND here, and its image, if
// any, is left alone). Encrypted ceph-csi volumes are refused: purerbd
// has no LUKS or fscrypt support yet.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultCephCSIInstanceID is ceph-csi's default --instanceid.
const DefaultCephCSIInstanceID = "default"

// ceph-csi journal keys and object name prefixes.
const (
	ccVolumeDir      = "csi.volumes."
	ccSnapDir        = "csi.snaps."
	ccVolumePrefix   = "csi.volume." // directory key and per-entry object
	ccSnapPrefix     = "csi.snap."
	ccVolNameKey     = "csi.volname"
	ccSnapNameKey    = "csi.snapname"
	ccImageNameKey   = "csi.imagename"
	ccImageIDKey     = "csi.imageid"
	ccJournalPoolKey = "csi.journalpool"
	ccSourceKey      = "csi.source"
	ccOwnerKey       = "csi.volume.owner"
	ccKMSKey         = "csi.volume.encryptKMS"
	ccEncTypeKey     = "csi.volume.encryptionType"
	ccGroupKey       = "csi.groupid"
	ccBackingKey     = "csi.volume.backingsnapshotid"

	ccDefaultVolumePrefix   = "csi-vol-"
	ccDefaultSnapshotPrefix = "csi-snap-"
)

// OmapStore reads and trims the omaps of plain RADOS objects: what
// purerbd needs of ceph-csi's journal. Session has it.
type OmapStore interface {
	// OmapValues returns those of keys that object has (absent keys are
	// left out); a missing object is an error wrapping ErrNotFound.
	OmapValues(ctx context.Context, pool int64, namespace, object string, keys []string) (map[string]string, error)
	// RemoveOmapKeys deletes keys from object's omap; a missing object
	// or key is not an error.
	RemoveOmapKeys(ctx context.Context, pool int64, namespace, object string, keys []string) error
	// RemoveObject deletes object; a missing one is not an error.
	RemoveObject(ctx context.Context, pool int64, namespace, object string) error
}

// cephCSIEntry is one entry of ceph-csi's journal: a volume or a
// snapshot.
type cephCSIEntry struct {
	Snapshot    bool
	Pool        int64 // where the per-entry object and the image are
	Namespace   string
	UUID        string
	RequestName string // the CO's name
	Image       string // RBD image (for a snapshot: the snapshot's own image)
	ImageID     string
	Source      string // snapshots: the source volume's image name
	JournalPool int64  // pool of the directory object
	KMS         string // set for encrypted volumes
	Encryption  string
	Owner       string
}

// entryObject is the name of an entry's per-entry object.
func (e cephCSIEntry) entryObject() string {
	if e.Snapshot {
		return ccSnapPrefix + e.UUID
	}
	return ccVolumePrefix + e.UUID
}

// kind names the entry's kind for messages.
func (e cephCSIEntry) kind() string {
	if e.Snapshot {
		return "snapshot"
	}
	return "volume"
}

// checkServable refuses what purerbd cannot serve: encrypted volumes
// and snapshots.
func (e cephCSIEntry) checkServable() error {
	switch {
	case e.KMS == "" && e.Encryption == "":
		return nil
	case e.KMS == cephCSIDefaultKMS && (e.Encryption == "" || e.Encryption == encryptionTypeBlock):
		// LUKS2 with the node-stage secret's passphrase: served as
		// purerbd's own encrypted volumes are (encryption.go).
		return nil
	case e.Encryption != "" && e.Encryption != encryptionTypeBlock:
		return status.Errorf(codes.FailedPrecondition,
			"ceph-csi %s %s (image %s) is encrypted with %q (fscrypt): purerbd encrypts only block devices; keep it on ceph-csi",
			e.kind(), e.UUID, e.Image, e.Encryption)
	default:
		return status.Errorf(codes.FailedPrecondition,
			"ceph-csi %s %s (image %s) is encrypted with KMS %q: purerbd takes passphrases only from the node-stage secret (ceph-csi's %q KMS); keep it on ceph-csi",
			e.kind(), e.UUID, e.Image, e.KMS, cephCSIDefaultKMS)
	}
}

// readCephCSIEntry reads the per-entry object of UUID in a pool's
// namespace, as ceph-csi's GetImageAttributes does. A missing object is
// an error wrapping ErrNotFound.
func readCephCSIEntry(ctx context.Context, s OmapStore, pool int64, ns, uuid string, snapshot bool) (cephCSIEntry, error) {
	e := cephCSIEntry{Snapshot: snapshot, Pool: pool, Namespace: ns, UUID: uuid, JournalPool: pool}
	nameKey := ccVolNameKey
	if snapshot {
		nameKey = ccSnapNameKey
	}
	keys := []string{nameKey, ccImageNameKey, ccImageIDKey, ccJournalPoolKey, ccSourceKey,
		ccOwnerKey, ccKMSKey, ccEncTypeKey, ccGroupKey, ccBackingKey}
	v, err := s.OmapValues(ctx, pool, ns, e.entryObject(), keys)
	if err != nil {
		return e, fmt.Errorf("ceph-csi journal object %s: %w", e.entryObject(), err)
	}
	e.RequestName = v[nameKey]
	e.ImageID = v[ccImageIDKey]
	e.Source = v[ccSourceKey]
	e.Owner = v[ccOwnerKey]
	e.KMS = v[ccKMSKey]
	e.Encryption = v[ccEncTypeKey]
	img, ok := v[ccImageNameKey]
	switch {
	case !ok && snapshot:
		img = ccDefaultSnapshotPrefix + uuid
	case !ok:
		img = ccDefaultVolumePrefix + uuid
	}
	if err := checkName("ceph-csi image name", img); err != nil {
		return e, fmt.Errorf("ceph-csi journal object %s: %w", e.entryObject(), err)
	}
	e.Image = img
	if jp, ok := v[ccJournalPoolKey]; ok {
		n, ok := fixedHex(jp)
		if len(jp) != 16 || !ok || int64(n) < 0 {
			return e, fmt.Errorf("ceph-csi journal object %s: %s %q is not a pool ID in 16 hex digits", e.entryObject(), ccJournalPoolKey, jp)
		}
		e.JournalPool = int64(n)
	}
	if snapshot && e.Source == "" {
		// GetImageAttributes fails the same way: a snapshot without
		// its source is not a complete entry.
		return e, fmt.Errorf("ceph-csi journal object %s has no %s: %w", e.entryObject(), ccSourceKey, ErrNotFound)
	}
	return e, nil
}

// undoCephCSIEntry removes a deleted volume's or snapshot's journal
// entry as ceph-csi's UndoReservation does: the per-entry object first,
// then the directory key, if it still points at this entry.
func undoCephCSIEntry(ctx context.Context, s OmapStore, e cephCSIEntry, instance string) error {
	if err := s.RemoveObject(ctx, e.Pool, e.Namespace, e.entryObject()); err != nil {
		return fmt.Errorf("removing ceph-csi journal object %s: %w", e.entryObject(), err)
	}
	if e.RequestName == "" {
		return nil
	}
	dir, key := ccVolumeDir+instance, ccVolumePrefix+e.RequestName
	if e.Snapshot {
		dir, key = ccSnapDir+instance, ccSnapPrefix+e.RequestName
	}
	v, err := s.OmapValues(ctx, e.JournalPool, e.Namespace, dir, []string{key})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ceph-csi journal directory %s: %w", dir, err)
	}
	val, ok := v[key]
	if !ok {
		return nil
	}
	// The value is UUID, or IMAGEPOOLID/UUID for an image pool other
	// than the journal pool; a key pointing elsewhere belongs to a newer
	// volume of the same CO name and stays.
	if _, uuid, found := strings.Cut(val, "/"); found {
		val = uuid
	}
	if val != e.UUID {
		return nil
	}
	if err := s.RemoveOmapKeys(ctx, e.JournalPool, e.Namespace, dir, []string{key}); err != nil {
		return fmt.Errorf("removing %s from ceph-csi journal directory %s: %w", key, dir, err)
	}
	return nil
}

// cephCSIEntryForImage finds the journal entry that proves an image
// named like ceph-csi's (PREFIX + UUID) is a ceph-csi volume or snapshot
// image: its per-entry object in the image's pool and namespace names
// exactly this image. ok is false when there is none.
func cephCSIEntryForImage(ctx context.Context, s OmapStore, pool int64, ns, name string) (cephCSIEntry, bool, error) {
	_, uuid, ok := splitCephCSIName(name)
	if !ok {
		return cephCSIEntry{}, false, nil
	}
	for _, snapshot := range []bool{false, true} {
		e, err := readCephCSIEntry(ctx, s, pool, ns, uuid, snapshot)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return e, false, err
		}
		if e.Image == name {
			return e, true, nil
		}
	}
	return cephCSIEntry{}, false, nil
}
