package csi

import (
	"context"
	"errors"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Volume creation and deletion. The steps of CreateVolume, each preceded
// by a fault-hook call, are:
//
//	create-volume/snap-source  (volume source only) snapshot the source
//	create-volume/create       create the image, or clone the source snapshot
//	create-volume/resize       grow a clone to the requested size
//	create-volume/set-source   metadata: the content source
//	create-volume/set-name     metadata: the CSI name, marking the image complete
//
// A retry after any of them finds the deterministically named image
// and carries on from where the failed call stopped; an incomplete image
// made from another source than the retry asks for is thrown away (it
// was never handed to the CO) and made again.

// source is a resolved volume content source.
type source struct {
	tag     string // metaSource value: "snapshot:ID" or "volume:ID"
	parent  ImageRef
	info    ImageInfo
	snap    string // snapshot to clone from
	snapID  uint64 // known up front for snapshot sources
	size    uint64
	fromVol bool // the snapshot is taken by CreateVolume itself
	byID    bool // cloned by snapID: a group snapshot's member, which no user snapshot name reaches
}

// resolveSource finds a request's content source; nil without one.
func (d *Driver) resolveSource(ctx context.Context, s Session, cluster Cluster, cred Credentials, src *csi.VolumeContentSource, target ImageRef) (*source, error) {
	switch {
	case src == nil:
		return nil, nil
	case src.GetSnapshot() != nil:
		id := src.GetSnapshot().GetSnapshotId()
		h, err := parseSnapshotHandle(id)
		if err != nil {
			return nil, status.Errorf(codes.NotFound, "source snapshot %q not found: %v", id, err)
		}
		if h.clusterID() != cluster.ID {
			return nil, status.Errorf(codes.InvalidArgument, "source snapshot is in cluster %q, the volume would be in cluster %q", h.clusterID(), cluster.ID)
		}
		if h.cephcsi != nil {
			return d.cephCSISnapshotSource(ctx, s, cluster, cred, h)
		}
		sid := h.native
		o, snap, err := findSnapshot(ctx, s, sid, cred)
		if err != nil {
			return nil, err
		}
		return &source{
			tag:    "snapshot:" + id,
			parent: o.ref,
			info:   o.info, snap: snap.Name, snapID: snap.ID, size: snap.Size,
			byID: snap.Group != nil,
		}, nil
	case src.GetVolume() != nil:
		id := src.GetVolume().GetVolumeId()
		h, err := parseVolumeHandle(id)
		if err != nil {
			return nil, status.Errorf(codes.NotFound, "source volume %q not found: %v", id, err)
		}
		if h.clusterID() != cluster.ID {
			return nil, status.Errorf(codes.InvalidArgument, "source volume is in cluster %q, the clone would be in cluster %q", h.clusterID(), cluster.ID)
		}
		vid, _, err := resolveVolume(ctx, s, cluster, h)
		if err != nil {
			return nil, storeError(err, cred, "source volume %q", id)
		}
		o, err := ownedVolume(ctx, s, vid.ref())
		if err != nil {
			return nil, storeError(err, cred, "source volume %q", id)
		}
		return &source{tag: "volume:" + id, parent: o.ref, info: o.info, snap: cloneSnapName(target), size: o.info.Size, fromVol: true}, nil
	default:
		return nil, status.Error(codes.InvalidArgument, "volume content source must be a snapshot or a volume")
	}
}

// findSnapshot returns the live snapshot a snapshot ID names and its
// image. A snapshot that is not the driver's (its image is someone
// else's, or its name is not a managed one) is NOT_FOUND.
func findSnapshot(ctx context.Context, s Session, sid SnapshotID, cred Credentials) (owner, SnapInfo, error) {
	if isGroupMemberSnap(sid.Snap) {
		return findMemberSnapshot(ctx, s, sid, cred)
	}
	if !isManagedName(sid.Snap) {
		return owner{}, SnapInfo{}, status.Errorf(codes.NotFound, "snapshot %s not found: %q is not a snapshot name the driver makes", sid, sid.Snap)
	}
	o, err := ownedImage(ctx, s, ImageRef{Pool: sid.Pool, Namespace: sid.Namespace, ID: sid.ImageID})
	if err != nil {
		return owner{}, SnapInfo{}, storeError(err, cred, "snapshot %s", sid)
	}
	snaps, err := s.ListSnapshots(ctx, o.ref)
	if err != nil {
		return owner{}, SnapInfo{}, storeError(err, cred, "snapshot %s", sid)
	}
	for _, sn := range snaps {
		if sn.Name == sid.Snap {
			return o, sn, nil
		}
	}
	return owner{}, SnapInfo{}, status.Errorf(codes.NotFound, "snapshot %s not found", sid)
}

// volumeRequest is a validated CreateVolume request.
type volumeRequest struct {
	name string
	cr   *csi.CapacityRange
	img  ImageRef
	src  *source
	size uint64
	opts ImageOptions
	// encryption is the new volume's (encryption.go).
	encryption newEncryption
}

// ensureVolume makes the image for r exist, complete, and compatible.
func (d *Driver) ensureVolume(ctx context.Context, s Session, cred Credentials, r volumeRequest) (ImageInfo, error) {
	info, err := s.StatImage(ctx, r.img)
	switch {
	case err == nil:
		done, err := d.existingVolume(ctx, s, cred, r, info)
		if err != nil || done {
			return info, err
		}
		if ok, err := d.parentMatches(ctx, s, cred, info.Parent, r.src); err != nil {
			return info, err
		} else if ok {
			return d.finishVolume(ctx, s, cred, r, info)
		}
		d.log.Info("removing an incomplete image made from another source", "image", r.img.Name)
		o := owner{info: info, ref: ImageRef{Pool: r.img.Pool, Namespace: r.img.Namespace, Name: info.Name}}
		if err := d.retire(ctx, s, cred, o); err != nil {
			return info, err
		}
	case !errors.Is(err, ErrNotFound):
		return info, storeError(err, cred, "image %s", r.img.Name)
	}

	if err := d.createImage(ctx, s, cred, r); err != nil {
		return info, err
	}
	info, err = s.StatImage(ctx, r.img)
	if errors.Is(err, ErrNotFound) {
		// The name is taken but there is no image: a creation
		// interrupted halfway (the ID object written, the header
		// not). Clear the remains and create again, once.
		d.log.Info("clearing the remains of an interrupted image creation", "image", r.img.Name)
		if err := s.RemoveImage(ctx, r.img); err != nil && !errors.Is(err, ErrNotFound) {
			return info, storeError(err, cred, "clearing the remains of image %s", r.img.Name)
		}
		if err := d.createImage(ctx, s, cred, r); err != nil {
			return info, err
		}
		info, err = s.StatImage(ctx, r.img)
	}
	if err != nil {
		return info, storeError(err, cred, "image %s", r.img.Name)
	}
	return d.finishVolume(ctx, s, cred, r, info)
}

// createImage creates or clones the image; an image already there is
// fine (an earlier attempt made it).
func (d *Driver) createImage(ctx context.Context, s Session, cred Credentials, r volumeRequest) error {
	if r.src == nil {
		if err := d.step("create-volume/create"); err != nil {
			return err
		}
		if err := s.CreateImage(ctx, r.img, r.size, r.opts); err != nil && !errors.Is(err, ErrExists) {
			return createError(err, cred, "creating image %s", r.img.Name)
		}
		return nil
	}
	if r.src.fromVol {
		if err := d.step("create-volume/snap-source"); err != nil {
			return err
		}
		if err := s.CreateSnapshot(ctx, r.src.parent, r.src.snap); err != nil && !errors.Is(err, ErrExists) {
			return storeError(err, cred, "snapshotting source image %s", r.src.parent.Name)
		}
	}
	if err := d.step("create-volume/create"); err != nil {
		return err
	}
	clone := func() error { return s.CloneImage(ctx, r.src.parent, r.src.snap, r.img, r.opts) }
	if r.src.byID {
		clone = func() error { return s.CloneImageFromSnapID(ctx, r.src.parent, r.src.snapID, r.img, r.opts) }
	}
	if err := clone(); err != nil && !errors.Is(err, ErrExists) {
		return createError(err, cred, "cloning %s@%s to %s", r.src.parent.Name, r.src.snap, r.img.Name)
	}
	return nil
}

// createError is storeError, except that a missing pool, namespace or
// data pool is the StorageClass's fault: INVALID_ARGUMENT, not NOT_FOUND
// (which CreateVolume reserves for a missing content source).
func createError(err error, cred Credentials, what string, args ...any) error {
	if errors.Is(err, ErrNotFound) {
		return status.Errorf(codes.InvalidArgument, "%s: %s (does the pool, radosNamespace or dataPool exist?)",
			fmt.Sprintf(what, args...), redact(err.Error(), cred))
	}
	return storeError(err, cred, what, args...)
}

// existingVolume checks a complete image against the request; done is
// false when the image is incomplete.
func (d *Driver) existingVolume(ctx context.Context, s Session, cred Credentials, r volumeRequest, info ImageInfo) (done bool, err error) {
	owner, err := s.Metadata(ctx, r.img, metaName)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, storeError(err, cred, "image %s", r.img.Name)
	}
	if owner != r.name {
		return true, status.Errorf(codes.AlreadyExists, "image %s belongs to volume %q", r.img.Name, owner)
	}
	tag, err := s.Metadata(ctx, r.img, metaSource)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return true, storeError(err, cred, "image %s", r.img.Name)
	}
	want := ""
	if r.src != nil {
		want = r.src.tag
	}
	if tag != want {
		return true, status.Errorf(codes.AlreadyExists, "volume %q exists with content source %q, not %q", r.name, tag, want)
	}
	if !sizeFits(info.Size, r.cr) {
		return true, status.Errorf(codes.AlreadyExists, "volume %q exists with %d bytes, outside the requested range [%d, %d]",
			r.name, info.Size, r.cr.GetRequiredBytes(), r.cr.GetLimitBytes())
	}
	return true, nil
}

// parentMatches reports whether an incomplete image was made from src.
func (d *Driver) parentMatches(ctx context.Context, s Session, cred Credentials, p *ParentInfo, src *source) (bool, error) {
	if src == nil || p == nil {
		return src == nil && p == nil, nil
	}
	if p.Pool != src.parent.Pool || p.Namespace != src.parent.Namespace || p.ImageID != src.info.ID {
		return false, nil
	}
	if !src.fromVol {
		return p.SnapID == src.snapID, nil
	}
	snaps, err := s.ListSnapshots(ctx, src.parent)
	if err != nil {
		return false, storeError(err, cred, "source image %s", src.parent.Name)
	}
	for _, sn := range snaps {
		if sn.Name == src.snap {
			return sn.ID == p.SnapID, nil
		}
	}
	return false, nil
}

// finishVolume runs the steps after the image exists.
func (d *Driver) finishVolume(ctx context.Context, s Session, cred Credentials, r volumeRequest, info ImageInfo) (ImageInfo, error) {
	if info.Size != r.size {
		if err := d.step("create-volume/resize"); err != nil {
			return info, err
		}
		if err := s.ResizeImage(ctx, r.img, r.size); err != nil {
			return info, storeError(err, cred, "resizing image %s", r.img.Name)
		}
		info.Size = r.size
	}
	tag := ""
	if r.src != nil {
		tag = r.src.tag
	}
	if r.encryption.state != "" {
		if err := d.step("create-volume/set-encryption"); err != nil {
			return info, err
		}
		if err := r.encryption.write(ctx, s, r.img); err != nil {
			return info, storeError(err, cred, "image %s metadata", r.img.Name)
		}
	}
	if err := d.step("create-volume/set-source"); err != nil {
		return info, err
	}
	if err := s.SetMetadata(ctx, r.img, metaSource, tag); err != nil {
		return info, storeError(err, cred, "image %s metadata", r.img.Name)
	}
	if err := d.step("create-volume/set-name"); err != nil {
		return info, err
	}
	if err := s.SetMetadata(ctx, r.img, metaName, r.name); err != nil {
		return info, storeError(err, cred, "image %s metadata", r.img.Name)
	}
	return info, nil
}

// Deletion. retireImage removes an image, or, while snapshots that CSI
// snapshots or clones need remain, renames it to a tombstone; either way
// the volume is gone for the CO. Its steps:
//
//	delete-volume/purge      remove internal and tombstoned snapshots nothing needs
//	delete-volume/tombstone  rename the image out of the way
//	delete-volume/remove     remove the image
//	delete-volume/cascade    release the parent snapshot and tombstoned ancestors
//
// What a crash between remove and cascade leaves behind (a childless
// internal snapshot, a tombstone without snapshots) is collected by
// Sweep.
//
// retireImage acts only on an image the driver owns (ownership.go); an
// image that is someone else's is left alone and reported as missing.
func (d *Driver) retireImage(ctx context.Context, s Session, cred Credentials, img ImageRef) error {
	o, err := ownedImage(ctx, s, img)
	if errors.Is(err, errNotOwned) {
		d.log.Warn("not deleting an image the driver does not own", "image", o.info.Name, "reason", err.Error())
		return nil
	}
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return storeError(err, cred, "image %s", img.Name)
	}
	return d.retire(ctx, s, cred, o)
}

// retire removes or tombstones an image known to be the driver's: one
// ownedImage accepted, or an incomplete one a retried CreateVolume found
// under the name it derives from the CO's own request.
func (d *Driver) retire(ctx context.Context, s Session, cred Credentials, o owner) error {
	img, info := o.ref, o.info
	if err := d.step("delete-volume/purge"); err != nil {
		return err
	}
	left, err := d.purgeSnapshots(ctx, s, img)
	if err != nil {
		return storeError(err, cred, "image %s", img.Name)
	}
	if len(left) == 0 {
		if err := d.step("delete-volume/remove"); err != nil {
			return err
		}
		err := s.RemoveImage(ctx, img)
		if errors.Is(err, ErrInGroup) {
			err = d.leaveInterruptedGroup(ctx, s, cred, img, err)
		}
		switch {
		case err == nil, errors.Is(err, ErrNotFound):
			if err := d.forgetCephCSI(ctx, s, o.cephcsi); err != nil {
				return storeError(err, cred, "image %s", img.Name)
			}
			if err := d.step("delete-volume/cascade"); err != nil {
				return err
			}
			d.cascade(ctx, s, info.Parent)
			return nil
		case errors.Is(err, ErrHasSnapshots):
			// Snapshots ListSnapshots does not show: RBD's snapshot
			// trash, which clones still need. Keep it as a tombstone.
		case errors.Is(err, ErrBusy):
			return status.Errorf(codes.FailedPrecondition, "image %s is in use: %v", img.Name, redact(err.Error(), cred))
		default:
			return storeError(err, cred, "removing image %s", img.Name)
		}
	}
	if o.tomb {
		return nil
	}
	if err := d.step("delete-volume/tombstone"); err != nil {
		return err
	}
	to := imageTombstone(img.Name, info.ID)
	if err := s.RenameImage(ctx, img, to); err != nil {
		return storeError(err, cred, "renaming image %s", img.Name)
	}
	d.log.Info("volume deleted; image kept as a tombstone until its snapshots and clones go",
		"image", to, "snapshots", len(left))
	return nil
}

// purgeSnapshots removes the internal clone snapshots and tombstoned
// snapshots of an image the driver owns that no clone needs any more,
// and returns the snapshots left.
func (d *Driver) purgeSnapshots(ctx context.Context, s Session, img ImageRef) ([]SnapInfo, error) {
	snaps, err := s.ListSnapshots(ctx, img)
	if err != nil {
		return nil, err
	}
	var left []SnapInfo
	for _, sn := range snaps {
		if !isCollectableSnap(sn) {
			left = append(left, sn)
			continue
		}
		switch err := s.RemoveSnapshot(ctx, img, sn.Name); {
		case err == nil, errors.Is(err, ErrNotFound):
		case errors.Is(err, ErrBusy):
			left = append(left, sn)
		default:
			return nil, err
		}
	}
	return left, nil
}

// cascade releases what a removed clone held: the parent snapshot if it
// was internal or tombstoned, then the parent image if it was a
// tombstone left with no snapshots, and so on up the chain, as long as
// each parent is the driver's. It is best effort: what it cannot remove
// now stays for Sweep.
func (d *Driver) cascade(ctx context.Context, s Session, p *ParentInfo) {
	for p != nil {
		o, err := ownedImage(ctx, s, ImageRef{Pool: p.Pool, Namespace: p.Namespace, ID: p.ImageID})
		if err != nil {
			if !errors.Is(err, ErrNotFound) {
				d.log.Warn("cascade: parent image", "imageID", p.ImageID, "error", err.Error())
			}
			return
		}
		if !d.releaseSnapshot(ctx, s, o.ref, p.SnapID) || !o.tomb {
			return
		}
		left, err := d.purgeSnapshots(ctx, s, o.ref)
		if err != nil {
			d.log.Warn("cascade: parent snapshots", "image", o.info.Name, "error", err.Error())
			return
		}
		if len(left) > 0 {
			return
		}
		if err := s.RemoveImage(ctx, o.ref); err != nil {
			if !errors.Is(err, ErrNotFound) {
				d.log.Info("cascade: tombstone stays", "image", o.info.Name, "error", err.Error())
			}
			return
		}
		d.log.Info("removed tombstone", "image", o.info.Name)
		if err := d.forgetCephCSI(ctx, s, o.cephcsi); err != nil {
			d.log.Warn("cascade: ceph-csi journal", "image", o.info.Name, "error", err.Error())
		}
		p = o.info.Parent
	}
}

// releaseSnapshot removes snapshot id of img, an image the driver owns,
// if it is internal or a tombstone and no other clone needs it. It
// returns false when the snapshot stays because clones still need it or
// on errors.
func (d *Driver) releaseSnapshot(ctx context.Context, s Session, img ImageRef, id uint64) bool {
	snaps, err := s.ListSnapshots(ctx, img)
	if err != nil {
		d.log.Warn("cascade: parent snapshots", "image", img.Name, "error", err.Error())
		return false
	}
	for _, sn := range snaps {
		if sn.ID != id || !isCollectableSnap(sn) {
			continue
		}
		switch err := s.RemoveSnapshot(ctx, img, sn.Name); {
		case err == nil, errors.Is(err, ErrNotFound):
		case errors.Is(err, ErrBusy):
			return false
		default:
			d.log.Warn("cascade: removing parent snapshot", "image", img.Name, "snapshot", sn.Name, "error", err.Error())
			return false
		}
	}
	return true
}

// volumeContext is what the node gets besides the volume ID.
func volumeContext(cluster Cluster, poolName string, img ImageRef, p volumeParams) map[string]string {
	vc := map[string]string{ctxClusterID: cluster.ID, ctxPool: poolName, ctxImageName: img.Name}
	if img.Namespace != "" {
		vc[ctxNamespace] = img.Namespace
	}
	if p.DataPool != "" {
		vc[ctxDataPool] = p.DataPool
	}
	if p.MkfsOptions != "" {
		vc[ctxMkfsOptions] = p.MkfsOptions
	}
	if p.FsType != "" {
		vc[ctxFsType] = p.FsType
	}
	if p.MapOptions != "" {
		vc[ctxMapOptions] = p.MapOptions
	}
	if p.DeviceType != "" && p.DeviceType != DeviceAuto {
		vc[ctxDeviceType] = p.DeviceType
	}
	return vc
}
