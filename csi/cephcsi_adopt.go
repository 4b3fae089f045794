package csi

// Adoption of ceph-csi volumes and snapshots. Every call that takes a
// volume or snapshot ID accepts ceph-csi's handles besides purerbd's own
// (volumeid.go); the image behind one is found through ceph-csi's
// journal (cephcsi_journal.go) and then served like a purerbd volume:
// same node path, same controller operations. purerbd keeps its own
// format for what it creates, including snapshots of and clones from
// ceph-csi volumes.
//
// Ownership (ownership.go) extends to these images: an image named
// PREFIX + UUID is the driver's when ceph-csi's per-entry journal object
// csi.volume.UUID or csi.snap.UUID in its pool and namespace names it.
// Deleting one removes the image and then its journal entry, as ceph-csi
// does; an image that must stay as a tombstone (purerbd snapshots or
// clones still hang from it) keeps its journal entry, the proof that it
// is the driver's, until the tombstone goes.

import (
	"context"
	"errors"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// volumeHandle is a volume ID in either format.
type volumeHandle struct {
	raw     string
	native  VolumeID
	cephcsi *CephCSIID
}

// parseVolumeHandle decodes a purerbd volume ID or a ceph-csi handle.
func parseVolumeHandle(id string) (volumeHandle, error) {
	v, err := ParseVolumeID(id)
	if err == nil {
		return volumeHandle{raw: id, native: v}, nil
	}
	c, cerr := ParseCephCSIID(id)
	if cerr == nil {
		return volumeHandle{raw: id, cephcsi: &c}, nil
	}
	return volumeHandle{}, fmt.Errorf("neither a purerbd volume ID (%w) nor a ceph-csi handle (%w)", err, cerr)
}

func (h volumeHandle) clusterID() string {
	if h.cephcsi != nil {
		return h.cephcsi.ClusterID
	}
	return h.native.ClusterID
}

// resolveVolume finds the image a volume handle names. For a ceph-csi
// handle it reads the journal; a missing entry is NOT_FOUND, an
// encrypted volume FAILED_PRECONDITION.
func resolveVolume(ctx context.Context, s OmapStore, cl Cluster, h volumeHandle) (VolumeID, *cephCSIEntry, error) {
	if h.cephcsi == nil {
		return h.native, nil, nil
	}
	e, err := readCephCSIEntry(ctx, s, h.cephcsi.Pool, cl.Namespace, h.cephcsi.UUID, false)
	if err != nil {
		return VolumeID{}, nil, fmt.Errorf("ceph-csi volume %q: %w", h.raw, err)
	}
	if err := e.checkServable(); err != nil {
		return VolumeID{}, nil, err
	}
	return VolumeID{ClusterID: cl.ID, Pool: e.Pool, Namespace: e.Namespace, Image: e.Image}, &e, nil
}

func (v VolumeID) ref() ImageRef {
	return ImageRef{Pool: v.Pool, Namespace: v.Namespace, Name: v.Image}
}

// instanceID is the ceph-csi instance whose journal directories the
// driver cleans up.
func (d *Driver) instanceID() string {
	if d.cfg.CephCSIInstanceID == "" {
		return DefaultCephCSIInstanceID
	}
	return d.cfg.CephCSIInstanceID
}

// cephCSITempSuffix names the intermediate image ceph-csi clones a
// volume through (internal/rbd/clone.go, generateTempClone): NAME-temp,
// parent of NAME; its DeleteVolume removes it with the volume
// (DeleteTempImage).
const cephCSITempSuffix = "-temp"

// forgetCephCSI removes an adopted image's journal entry once the image
// is gone, and before it, as ceph-csi's DeleteVolume does, the
// temporary clone a ceph-csi volume made from a volume hangs from.
func (d *Driver) forgetCephCSI(ctx context.Context, s Session, e *cephCSIEntry) error {
	if e == nil {
		return nil
	}
	if err := d.step("delete-cephcsi/journal"); err != nil {
		return err
	}
	if !e.Snapshot {
		temp := ImageRef{Pool: e.Pool, Namespace: e.Namespace, Name: e.Image + cephCSITempSuffix}
		switch err := s.RemoveImage(ctx, temp); {
		case err == nil:
			d.log.Info("removed the temporary clone of a deleted ceph-csi volume", "image", temp.Name)
		case errors.Is(err, ErrNotFound):
		case errors.Is(err, ErrHasSnapshots), errors.Is(err, ErrBusy):
			d.log.Warn("the temporary clone of a deleted ceph-csi volume stays", "image", temp.Name, "error", err.Error())
		default:
			return fmt.Errorf("removing %s: %w", temp.Name, err)
		}
	}
	if err := undoCephCSIEntry(ctx, s, *e, d.instanceID()); err != nil {
		return err
	}
	d.log.Info("removed the ceph-csi journal entry of a deleted "+e.kind(), "uuid", e.UUID, "image", e.Image, "name", e.RequestName)
	return nil
}

// forgetIfGone removes the journal entry of a ceph-csi volume or
// snapshot whose image is not found by name: an earlier delete removed
// it and did not finish. An image that is still there under its ID is a
// tombstone, which keeps its entry until it goes.
func (d *Driver) forgetIfGone(ctx context.Context, s Session, e *cephCSIEntry) error {
	if e.ImageID != "" {
		_, err := s.StatImage(ctx, ImageRef{Pool: e.Pool, Namespace: e.Namespace, ID: e.ImageID})
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return d.forgetCephCSI(ctx, s, e)
}

// deleteCephCSIVolume is DeleteVolume for a ceph-csi handle.
func (d *Driver) deleteCephCSIVolume(ctx context.Context, h volumeHandle, secrets map[string]string) error {
	unlock, err := d.inFlight.lock("volume " + h.raw)
	if err != nil {
		return err
	}
	defer unlock()
	cl, cred, s, err := d.open(ctx, h.clusterID(), secrets, changing)
	if err != nil {
		return err
	}
	vid, e, err := resolveVolume(ctx, s, cl, h)
	if errors.Is(err, ErrNotFound) {
		d.log.Info("DeleteVolume: no ceph-csi journal entry, nothing to delete", "volumeID", h.raw)
		return nil
	}
	if err != nil {
		return storeError(err, cred, "volume %q", h.raw)
	}
	unlockImage, err := d.lockImages(ctx, s, cl.ID, vid.ref())
	if err != nil {
		return err
	}
	defer unlockImage()
	o, err := ownedVolume(ctx, s, vid.ref())
	switch {
	case errors.Is(err, ErrNotFound):
		// Removed by an earlier attempt that did not finish, as ceph-csi's
		// DeleteVolume finishes it (checkErrAndUndoReserve).
		return storeError(d.forgetIfGone(ctx, s, e), cred, "volume %q", h.raw)
	case err != nil:
		return storeError(err, cred, "volume %q", h.raw)
	}
	return d.retire(ctx, s, cred, o)
}

// snapshotHandle is a snapshot ID in either format.
type snapshotHandle struct {
	raw     string
	native  SnapshotID
	cephcsi *CephCSIID
}

func parseSnapshotHandle(id string) (snapshotHandle, error) {
	sid, err := ParseSnapshotID(id)
	if err == nil {
		return snapshotHandle{raw: id, native: sid}, nil
	}
	c, cerr := ParseCephCSIID(id)
	if cerr == nil {
		return snapshotHandle{raw: id, cephcsi: &c}, nil
	}
	return snapshotHandle{}, fmt.Errorf("neither a purerbd snapshot ID (%w) nor a ceph-csi handle (%w)", err, cerr)
}

func (h snapshotHandle) clusterID() string {
	if h.cephcsi != nil {
		return h.cephcsi.ClusterID
	}
	return h.native.ClusterID
}

// cephCSISnapshot is a ceph-csi snapshot found through the journal: the
// RBD snapshot named like its image, on that image.
type cephCSISnapshot struct {
	entry cephCSIEntry
	img   owner
	snap  SnapInfo
}

// findCephCSISnapshot resolves a ceph-csi snapshot handle. A missing
// journal entry, image or RBD snapshot is NOT_FOUND; the entry comes
// back with the NOT_FOUND of a missing image or snapshot so that
// DeleteSnapshot can clean it up.
func findCephCSISnapshot(ctx context.Context, s Session, cl Cluster, c CephCSIID, cred Credentials) (cephCSISnapshot, error) {
	var r cephCSISnapshot
	e, err := readCephCSIEntry(ctx, s, c.Pool, cl.Namespace, c.UUID, true)
	if err != nil {
		return r, storeError(err, cred, "ceph-csi snapshot %s", c)
	}
	r.entry = e
	if err := e.checkServable(); err != nil {
		return r, err
	}
	o, err := ownedImage(ctx, s, ImageRef{Pool: e.Pool, Namespace: e.Namespace, Name: e.Image})
	if err == nil && o.tomb {
		err = ErrNotFound
	}
	if err != nil {
		return r, storeError(err, cred, "image %s of ceph-csi snapshot %s", e.Image, c)
	}
	r.img = o
	sn, ok, err := cephCSISnapOf(ctx, s, o)
	if err != nil {
		return r, storeError(err, cred, "snapshots of %s", e.Image)
	}
	if ok {
		r.snap = sn
		return r, nil
	}
	return r, status.Errorf(codes.NotFound, "ceph-csi snapshot %s: image %s has no snapshot %s", c, e.Image, e.Image)
}

// sourceVolumeID is the ceph-csi handle of the volume a ceph-csi
// snapshot was taken of, rebuilt from the source image's name (the
// snapshot's image is in its source's pool); "" if it cannot be.
func (r cephCSISnapshot) sourceVolumeID(c CephCSIID) string {
	_, uuid, ok := splitCephCSIName(r.entry.Source)
	if !ok {
		return ""
	}
	return CephCSIID{ClusterID: c.ClusterID, Pool: c.Pool, UUID: uuid}.String()
}

// deleteCephCSISnapshot is DeleteSnapshot for a ceph-csi handle: remove
// the RBD snapshot and the snapshot's image, then the journal entry, as
// ceph-csi's DeleteSnapshot does. A snapshot that purerbd clones still
// need stays as a tombstone with its journal entry until they go.
func (d *Driver) deleteCephCSISnapshot(ctx context.Context, h snapshotHandle, secrets map[string]string) error {
	unlock, err := d.inFlight.lock("snapshot " + h.raw)
	if err != nil {
		return err
	}
	defer unlock()
	cl, cred, s, err := d.open(ctx, h.clusterID(), secrets, changing)
	if err != nil {
		return err
	}
	r, err := findCephCSISnapshot(ctx, s, cl, *h.cephcsi, cred)
	switch {
	case status.Code(err) == codes.NotFound && r.entry.UUID == "":
		d.log.Info("DeleteSnapshot: no ceph-csi journal entry, nothing to delete", "snapshotID", h.raw)
		return nil
	case status.Code(err) == codes.NotFound && r.img.ref.Name == "":
		return storeError(d.forgetIfGone(ctx, s, &r.entry), cred, "snapshot %q", h.raw)
	case status.Code(err) == codes.NotFound:
		// The image is there without its snapshot: finish what an
		// earlier attempt began.
	case err != nil:
		return err
	}
	unlockImage, err := d.lockImages(ctx, s, cl.ID, r.img.ref)
	if err != nil {
		return err
	}
	defer unlockImage()
	if r.snap.Name != "" {
		if err := d.step("delete-snapshot/remove"); err != nil {
			return err
		}
		switch err := s.RemoveSnapshot(ctx, r.img.ref, r.snap.Name); {
		case errors.Is(err, ErrBusy):
			to := snapTombstone(r.snap.Name, r.snap.ID)
			if err := s.RenameSnapshot(ctx, r.img.ref, r.snap.Name, to); err != nil {
				return storeError(err, cred, "renaming snapshot %s@%s", r.img.ref.Name, r.snap.Name)
			}
		case err != nil && !errors.Is(err, ErrNotFound):
			return storeError(err, cred, "removing snapshot %s@%s", r.img.ref.Name, r.snap.Name)
		}
	}
	return d.retire(ctx, s, cred, r.img)
}

// cephCSISnapshotSource is resolveSource for a ceph-csi snapshot.
func (d *Driver) cephCSISnapshotSource(ctx context.Context, s Session, cl Cluster, cred Credentials, h snapshotHandle) (*source, error) {
	r, err := findCephCSISnapshot(ctx, s, cl, *h.cephcsi, cred)
	if err != nil {
		return nil, err
	}
	return &source{
		tag:    "snapshot:" + h.raw,
		parent: r.img.ref,
		info:   r.img.info, snap: r.snap.Name, snapID: r.snap.ID, size: r.snap.Size,
	}, nil
}

// cephCSISnapshotMessage describes a ceph-csi snapshot for GetSnapshot
// and ListSnapshots.
func cephCSISnapshotMessage(h snapshotHandle, r cephCSISnapshot) *csi.Snapshot {
	return snapshotMessage(h.raw, r.sourceVolumeID(*h.cephcsi), r.snap)
}
