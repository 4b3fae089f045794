package csi

// Listing ceph-csi's volumes and snapshots. ListVolumes and ListSnapshots
// name an image that ceph-csi's journal proves is the driver's
// (ownership.go, adoptedImage) by its ceph-csi handle, the ID its
// PersistentVolume or VolumeSnapshotContent carries. A handle names no
// RADOS namespace (the cluster's radosNamespace supplies it), so only
// entries of that namespace are listed: one elsewhere could not be found
// again by its handle. Encrypted volumes, which purerbd does not serve,
// are left out.

import (
	"context"
	"errors"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// handle is the ceph-csi handle of an entry of cl's journal.
func (e cephCSIEntry) handle(cl Cluster) string {
	return CephCSIID{ClusterID: cl.ID, Pool: e.Pool, UUID: e.UUID}.String()
}

// hasCephCSIShape tells whether a listed image name can be one ceph-csi
// made (PREFIX + UUID) or the tombstone of one, before reading it.
func hasCephCSIShape(name string) bool {
	_, _, ok := splitCephCSIName(liveName(name))
	return ok
}

// listedCephCSI checks a scanned image of ceph-csi's shape. ok is false
// when it is not a servable ceph-csi volume or snapshot image of the
// cluster's namespace (or is gone since the scan).
func listedCephCSI(ctx context.Context, s Session, im scanned) (o owner, ok bool, err error) {
	if im.ns != im.cluster.Namespace || !hasCephCSIShape(im.name) {
		return owner{}, false, nil
	}
	o, err = ownedImage(ctx, s, ImageRef{Pool: im.pool, Namespace: im.ns, Name: im.name})
	if errors.Is(err, ErrNotFound) {
		return o, false, nil
	}
	if err != nil {
		return o, false, err
	}
	if o.cephcsi == nil || o.cephcsi.checkServable() != nil {
		return o, false, nil
	}
	return o, true, nil
}

// cephCSISnapOf finds the RBD snapshot that makes a ceph-csi snapshot
// image a snapshot: the one named like the image. ok is false without.
func cephCSISnapOf(ctx context.Context, s Session, o owner) (sn SnapInfo, ok bool, err error) {
	snaps, err := s.ListSnapshots(ctx, o.ref)
	if err != nil {
		return SnapInfo{}, false, err
	}
	for _, sn := range snaps {
		if sn.Name == o.cephcsi.Image {
			return sn, true, nil
		}
	}
	return SnapInfo{}, false, nil
}

// addCephCSISnapshots adds what a scanned ceph-csi image holds: the
// ceph-csi snapshot an image of one is, or purerbd's snapshots of a
// ceph-csi volume (alive or a tombstone), whose source is the volume's
// handle.
func (d *Driver) addCephCSISnapshots(ctx context.Context, s Session, cred Credentials, im scanned, o owner, add func(*csi.Snapshot)) error {
	e := o.cephcsi
	if !e.Snapshot {
		handle := e.handle(im.cluster)
		return d.addSnapshots(ctx, s, cred, im.cluster, im.pool, im.ns, o.info, func(sn *csi.Snapshot) {
			sn.SourceVolumeId = handle
			add(sn)
		})
	}
	if o.tomb {
		return nil // deleted: kept only for purerbd clones
	}
	sn, ok, err := cephCSISnapOf(ctx, s, o)
	if errors.Is(err, ErrNotFound) || err == nil && !ok {
		return nil
	}
	if err != nil {
		return storeError(err, cred, "snapshots of %s", o.ref.Name)
	}
	c := CephCSIID{ClusterID: im.cluster.ID, Pool: e.Pool, UUID: e.UUID}
	r := cephCSISnapshot{entry: *e, img: o, snap: sn}
	add(snapshotMessage(c.String(), r.sourceVolumeID(c), sn))
	return nil
}

// addCephCSISnapshotsOf adds the ceph-csi snapshots taken of the ceph-csi
// volume src, found by the source their journal entries record among
// the images of its pool and namespace.
func (d *Driver) addCephCSISnapshotsOf(ctx context.Context, s Session, cred Credentials, cl Cluster, src VolumeID, add func(*csi.Snapshot)) error {
	names, err := s.ListImages(ctx, src.Pool, src.Namespace)
	if err != nil {
		return storeError(err, cred, "images of pool %d", src.Pool)
	}
	for _, n := range names {
		im := scanned{cluster: cl, pool: src.Pool, ns: src.Namespace, name: n}
		o, ok, err := listedCephCSI(ctx, s, im)
		if err != nil {
			return storeError(err, cred, "image %s", n)
		}
		if !ok || !o.cephcsi.Snapshot || o.cephcsi.Source != src.Image {
			continue
		}
		if err := d.addCephCSISnapshots(ctx, s, cred, im, o, add); err != nil {
			return err
		}
	}
	return nil
}
