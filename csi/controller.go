package csi

import (
	"context"
	"errors"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The Controller service. No ControllerPublish: a node opens RBD images
// itself from the volume ID, so nothing needs attaching (the CSIDriver
// object says attachRequired: false and no csi-attacher runs).

type controller struct {
	csi.UnimplementedControllerServer
	d *Driver
}

var controllerCaps = []csi.ControllerServiceCapability_RPC_Type{
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
	csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
	csi.ControllerServiceCapability_RPC_GET_SNAPSHOT,
	csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
	csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	csi.ControllerServiceCapability_RPC_GET_VOLUME,
	csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	csi.ControllerServiceCapability_RPC_MODIFY_VOLUME,
}

func (c *controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	caps := make([]*csi.ControllerServiceCapability, len(controllerCaps))
	for i, t := range controllerCaps {
		caps[i] = &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}}
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// cluster finds a cluster by ID; an empty ID means the only one
// configured.
func (d *Driver) cluster(id string) (Cluster, error) {
	cs, err := d.clusters()
	if err != nil {
		return Cluster{}, status.Error(codes.FailedPrecondition, err.Error())
	}
	if id == "" {
		if len(cs) == 1 {
			return cs[0], nil
		}
		return Cluster{}, status.Errorf(codes.InvalidArgument, "parameter %q is required when the cluster config lists %d clusters", paramClusterID, len(cs))
	}
	c, ok := cs.Find(id)
	if !ok {
		return Cluster{}, status.Errorf(codes.InvalidArgument, "cluster %q is not in the cluster config", id)
	}
	return c, nil
}

// open returns a session on a cluster with the request's secrets or, if
// a allows it, the plugin's credentials.
func (d *Driver) open(ctx context.Context, clusterID string, secrets map[string]string, a access) (Cluster, Credentials, Session, error) {
	cl, err := d.cluster(clusterID)
	if err != nil {
		return cl, Credentials{}, nil, err
	}
	cred, err := d.credentials(secrets, cl.ID, a)
	if err != nil {
		return cl, cred, nil, err
	}
	s, err := d.cfg.Store.Session(ctx, cl, cred)
	if err != nil {
		return cl, cred, nil, storeError(err, cred, "cluster %q", cl.ID)
	}
	return cl, cred, s, nil
}

func (c *controller) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	d := c.d
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	src := req.GetVolumeContentSource()
	if err := checkCapabilities(req.GetVolumeCapabilities(), src != nil); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	qos, err := parseQoSParams(req.GetMutableParameters())
	if err != nil {
		return nil, err
	}
	p, err := parseVolumeParams(req.GetParameters())
	if err != nil {
		return nil, err
	}
	if fs := fsTypeOf(req.GetVolumeCapabilities()); fs != "" {
		p.FsType = fs
	}
	if err := checkClassMkfsOptions(p.FsType, p.MkfsOptions); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	unlock, err := d.inFlight.lock(nameKey("volume", req.GetName()))
	if err != nil {
		return nil, err
	}
	defer unlock()

	cl, cred, s, err := d.open(ctx, p.ClusterID, req.GetSecrets(), changing)
	if err != nil {
		return nil, err
	}
	ns := cl.Namespace
	if p.hasNS {
		ns = p.Namespace
	}
	var accessible []*csi.Topology
	if p.TopologyPools != nil {
		tp, topo, ok, err := poolForTopology(p.TopologyPools, req.GetAccessibilityRequirements())
		switch {
		case err != nil:
			return nil, status.Error(codes.ResourceExhausted, err.Error())
		case ok:
			p.Pool, p.DataPool = tp.PoolName, tp.DataPoolName
			accessible = []*csi.Topology{{Segments: topo.GetSegments()}}
		case p.Pool == "":
			return nil, status.Errorf(codes.InvalidArgument, "the request has no accessibility requirements to choose a pool of %s by, and the class names no %q",
				paramTopologyPools, paramPool)
		}
	}
	pool, err := s.LookupPool(ctx, p.Pool)
	if errors.Is(err, ErrNotFound) {
		return nil, status.Errorf(codes.InvalidArgument, "pool %q does not exist in cluster %q", p.Pool, cl.ID)
	}
	if err != nil {
		return nil, storeError(err, cred, "pool %q", p.Pool)
	}
	if p.DataPool != "" {
		if _, err := s.LookupPool(ctx, p.DataPool); errors.Is(err, ErrNotFound) {
			return nil, status.Errorf(codes.InvalidArgument, "data pool %q does not exist in cluster %q", p.DataPool, cl.ID)
		} else if err != nil {
			return nil, storeError(err, cred, "data pool %q", p.DataPool)
		}
	}
	img := ImageRef{Pool: pool, Namespace: ns, Name: volumeImageName(p.Prefix, req.GetName())}
	volID, err := VolumeID{ClusterID: cl.ID, Pool: pool, Namespace: ns, Image: img.Name}.Encode()
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	imgs := []ImageRef{img}
	source, err := d.resolveSource(ctx, s, cl, cred, src, img)
	if err != nil {
		return nil, err
	}
	if source != nil && imageKey(cl.ID, source.parent) != imageKey(cl.ID, img) {
		imgs = append(imgs, source.parent)
	}
	unlockImages, err := d.lockImages(ctx, s, cl.ID, imgs...)
	if err != nil {
		return nil, err
	}
	defer unlockImages()
	var min uint64
	if source != nil {
		min = source.size
	}
	size, err := chooseSize(req.GetCapacityRange(), min)
	if err != nil {
		return nil, err
	}
	enc, err := d.newVolumeEncryption(ctx, s, cl, cred, p, source, size, volID, req.GetSecrets())
	if err != nil {
		return nil, err
	}
	info, err := d.ensureVolume(ctx, s, cred, volumeRequest{
		name: req.GetName(), cr: req.GetCapacityRange(), img: img, src: source, size: size, encryption: enc,
		opts: ImageOptions{Features: p.Features, DataPool: p.DataPool,
			Order: p.Layout.order(), StripeUnit: p.Layout.StripeUnit, StripeCount: p.Layout.StripeCount},
	})
	if err != nil {
		return nil, err
	}
	if err := setQoS(ctx, s, cred, img, qos); err != nil {
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           volID,
		CapacityBytes:      int64(info.Size),
		VolumeContext:      volumeContext(cl, p.Pool, img, p),
		ContentSource:      src,
		AccessibleTopology: accessible,
	}}, nil
}

func (c *controller) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	d := c.d
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	h, err := parseVolumeHandle(req.GetVolumeId())
	if err != nil {
		d.log.Info("DeleteVolume: not a volume ID, nothing to delete", "volumeID", req.GetVolumeId(), "error", err.Error())
		return &csi.DeleteVolumeResponse{}, nil
	}
	if h.cephcsi != nil {
		if err := d.deleteCephCSIVolume(ctx, h, req.GetSecrets()); err != nil {
			return nil, err
		}
		return &csi.DeleteVolumeResponse{}, nil
	}
	vid := h.native
	img := ImageRef{Pool: vid.Pool, Namespace: vid.Namespace, Name: vid.Image}
	unlock, err := d.inFlight.lock(imageKey(vid.ClusterID, img))
	if err != nil {
		return nil, err
	}
	defer unlock()
	_, cred, s, err := d.open(ctx, vid.ClusterID, req.GetSecrets(), changing)
	if err != nil {
		return nil, err
	}
	unlockAcross, err := d.lockAcross(ctx, s, vid.ClusterID, img)
	if err != nil {
		return nil, err
	}
	defer unlockAcross()
	if err := d.retireImage(ctx, s, cred, img); err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// volumeByID opens the cluster of a volume ID and stats its image; a
// volume that cannot exist, does not exist, or names an image the driver
// does not own is NOT_FOUND.
//
// A ceph-csi handle is resolved through ceph-csi's journal; the VolumeID
// returned then names the image it found.
func (d *Driver) volumeByID(ctx context.Context, id string, secrets map[string]string, a access) (VolumeID, Credentials, Session, ImageInfo, error) {
	h, err := parseVolumeHandle(id)
	if err != nil {
		return VolumeID{}, Credentials{}, nil, ImageInfo{}, status.Errorf(codes.NotFound, "volume %q not found: %v", id, err)
	}
	cl, cred, s, err := d.open(ctx, h.clusterID(), secrets, a)
	if err != nil {
		return VolumeID{}, cred, nil, ImageInfo{}, err
	}
	vid, _, err := resolveVolume(ctx, s, cl, h)
	if err != nil {
		return vid, cred, s, ImageInfo{}, storeError(err, cred, "volume %q", id)
	}
	o, err := ownedVolume(ctx, s, vid.ref())
	if err != nil {
		return vid, cred, s, o.info, storeError(err, cred, "volume %q", id)
	}
	return vid, cred, s, o.info, nil
}

func (c *controller) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	if _, err := parseVolumeParams(req.GetParameters()); len(req.GetParameters()) > 0 && err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: errorMessage(err)}, nil
	}
	if _, _, _, _, err := c.d.volumeByID(ctx, req.GetVolumeId(), req.GetSecrets(), reading); err != nil {
		return nil, err
	}
	// An existing volume has content, so read-only many is fine.
	if err := checkCapabilities(req.GetVolumeCapabilities(), true); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

func (c *controller) ControllerGetVolume(ctx context.Context, req *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	_, _, _, info, err := c.d.volumeByID(ctx, req.GetVolumeId(), nil, reading)
	if err != nil {
		return nil, err
	}
	return &csi.ControllerGetVolumeResponse{
		Volume: &csi.Volume{VolumeId: req.GetVolumeId(), CapacityBytes: int64(info.Size)},
		Status: &csi.ControllerGetVolumeResponse_VolumeStatus{},
	}, nil
}

func (c *controller) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	d := c.d
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	cr := req.GetCapacityRange()
	if cr == nil {
		return nil, status.Error(codes.InvalidArgument, "capacity range is required")
	}
	if vc := req.GetVolumeCapability(); vc != nil {
		if err := checkCapability(vc, true); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "volume capability: %v", err)
		}
	}
	want, err := chooseSize(cr, 0)
	if err != nil {
		return nil, err
	}
	if cr.GetRequiredBytes() > 0 {
		// Growing to exactly what was asked keeps the CO's and the
		// image's idea of the size the same.
		want = max(roundUp(uint64(cr.GetRequiredBytes()), sizeAlign), 1)
	}
	// A filesystem must be grown by the node; a block device is
	// already its new size.
	nodeExpansion := !isBlock(req.GetVolumeCapability())
	unlock, err := d.inFlight.lock("volume " + req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	vid, cred, s, info, err := d.volumeByID(ctx, req.GetVolumeId(), req.GetSecrets(), changing)
	if err != nil {
		return nil, err
	}
	img := vid.ref()
	unlockImage, err := d.lockImages(ctx, s, vid.ClusterID, img)
	if err != nil {
		return nil, err
	}
	defer unlockImage()
	if info.Size >= want {
		return &csi.ControllerExpandVolumeResponse{CapacityBytes: int64(info.Size), NodeExpansionRequired: nodeExpansion}, nil
	}
	if err := s.ResizeImage(ctx, img, want); err != nil {
		return nil, storeError(err, cred, "resizing volume %q", req.GetVolumeId())
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: int64(want), NodeExpansionRequired: nodeExpansion}, nil
}

// GetCapacity reports what the pool a StorageClass names can still hold
// (Ceph's MAX AVAIL, which accounts for replication); without a pool
// parameter it reports 0, "unknown".
func (c *controller) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	d := c.d
	if caps := req.GetVolumeCapabilities(); len(caps) > 0 {
		if err := checkCapabilities(caps, true); err != nil {
			return &csi.GetCapacityResponse{}, nil // nothing of this shape fits
		}
	}
	if len(req.GetParameters()) == 0 {
		return &csi.GetCapacityResponse{}, nil
	}
	p, err := parseVolumeParams(req.GetParameters())
	if err != nil {
		return nil, err
	}
	if p.TopologyPools != nil {
		var req2 *csi.TopologyRequirement
		if t := req.GetAccessibleTopology(); t != nil {
			req2 = &csi.TopologyRequirement{Requisite: []*csi.Topology{t}}
		}
		tp, _, ok, err := poolForTopology(p.TopologyPools, req2)
		switch {
		case err != nil:
			return &csi.GetCapacityResponse{}, nil // no pool serves that topology
		case ok:
			p.Pool = tp.PoolName
		case p.Pool == "":
			return &csi.GetCapacityResponse{}, nil
		}
	}
	cl, cred, s, err := d.open(ctx, p.ClusterID, nil, reading)
	if err != nil {
		return nil, err
	}
	pool, err := s.LookupPool(ctx, p.Pool)
	if errors.Is(err, ErrNotFound) {
		return nil, status.Errorf(codes.InvalidArgument, "pool %q does not exist in cluster %q", p.Pool, cl.ID)
	}
	if err != nil {
		return nil, storeError(err, cred, "pool %q", p.Pool)
	}
	avail, err := s.PoolAvailable(ctx, pool)
	if err != nil {
		return nil, storeError(err, cred, "pool %q", p.Pool)
	}
	return &csi.GetCapacityResponse{AvailableCapacity: avail}, nil
}

func (c *controller) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	d := c.d
	if req.GetMaxEntries() < 0 {
		return nil, status.Error(codes.InvalidArgument, "max entries is negative")
	}
	after, err := decodeToken(req.GetStartingToken(), func(s string) bool { _, err := parseVolumeHandle(s); return err == nil })
	if err != nil {
		return nil, err
	}
	var pg page[*csi.ListVolumesResponse_Entry]
	err = d.scanImages(ctx, d.pluginCredentials, func(s Session, cred Credentials, im scanned) error {
		if !isManagedName(im.name) {
			o, ok, err := listedCephCSI(ctx, s, im)
			if err != nil {
				return storeError(err, cred, "image %s", im.name)
			}
			if ok && !o.tomb && !o.cephcsi.Snapshot {
				id := o.cephcsi.handle(im.cluster)
				pg.add(id, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{VolumeId: id, CapacityBytes: int64(o.info.Size)}})
			}
			return nil
		}
		id, err := VolumeID{ClusterID: im.cluster.ID, Pool: im.pool, Namespace: im.ns, Image: im.name}.Encode()
		if err != nil {
			return nil
		}
		o, err := ownedImage(ctx, s, ImageRef{Pool: im.pool, Namespace: im.ns, Name: im.name})
		if errors.Is(err, ErrNotFound) {
			return nil // removed since the listing, or not the driver's
		}
		if err != nil {
			return storeError(err, cred, "image %s", im.name)
		}
		pg.add(id, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{VolumeId: id, CapacityBytes: int64(o.info.Size)}})
		return nil
	})
	if err != nil {
		return nil, err
	}
	entries, next := pg.take(after, req.GetMaxEntries())
	return &csi.ListVolumesResponse{Entries: entries, NextToken: next}, nil
}

// pluginCredentials are the plugin's own credentials for a cluster, for
// calls that carry no secrets.
func (d *Driver) pluginCredentials(c Cluster) (Credentials, error) {
	if d.cfg.Credentials != nil {
		if cred, ok := d.cfg.Credentials(c.ID); ok {
			return cred, nil
		}
	}
	return Credentials{}, status.Errorf(codes.FailedPrecondition, "no plugin credentials for cluster %q (see --secrets-dir)", c.ID)
}

func (c *controller) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	d := c.d
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if req.GetSourceVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "source volume ID is required")
	}
	p, err := parseSnapshotParams(req.GetParameters())
	if err != nil {
		return nil, err
	}
	h, err := parseVolumeHandle(req.GetSourceVolumeId())
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "source volume %q not found: %v", req.GetSourceVolumeId(), err)
	}
	if p.ClusterID != "" && p.ClusterID != h.clusterID() {
		return nil, status.Errorf(codes.InvalidArgument, "source volume is in cluster %q, the snapshot class names cluster %q", h.clusterID(), p.ClusterID)
	}
	unlock, err := d.inFlight.lock(nameKey("snapshot", req.GetName()))
	if err != nil {
		return nil, err
	}
	defer unlock()
	cl, cred, s, err := d.open(ctx, h.clusterID(), req.GetSecrets(), changing)
	if err != nil {
		return nil, err
	}
	vid, _, err := resolveVolume(ctx, s, cl, h)
	if err != nil {
		return nil, storeError(err, cred, "source volume %q", req.GetSourceVolumeId())
	}
	src := vid.ref()
	unlockImage, err := d.lockImages(ctx, s, vid.ClusterID, src)
	if err != nil {
		return nil, err
	}
	defer unlockImage()
	snap, err := d.ensureSnapshot(ctx, s, cred, snapshotRequest{
		name: req.GetName(), source: req.GetSourceVolumeId(), src: src,
		snap: snapshotName(p.Prefix, req.GetName()), cluster: cl,
	})
	if err != nil {
		return nil, err
	}
	return &csi.CreateSnapshotResponse{Snapshot: snap}, nil
}

func (c *controller) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	d := c.d
	if req.GetSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot ID is required")
	}
	h, err := parseSnapshotHandle(req.GetSnapshotId())
	if err != nil {
		d.log.Info("DeleteSnapshot: not a snapshot ID, nothing to delete", "snapshotID", req.GetSnapshotId(), "error", err.Error())
		return &csi.DeleteSnapshotResponse{}, nil
	}
	if h.cephcsi != nil {
		if err := d.deleteCephCSISnapshot(ctx, h, req.GetSecrets()); err != nil {
			return nil, err
		}
		return &csi.DeleteSnapshotResponse{}, nil
	}
	sid := h.native
	unlock, err := d.inFlight.lock("snapshot " + req.GetSnapshotId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	cl, cred, s, err := d.open(ctx, sid.ClusterID, req.GetSecrets(), changing)
	if err != nil {
		return nil, err
	}
	if isGroupMemberSnap(sid.Snap) {
		// The spec: a snapshot that is part of a group goes with its
		// group (DeleteVolumeGroupSnapshot).
		switch _, _, err := findSnapshot(ctx, s, sid, cred); status.Code(err) {
		case codes.OK:
			return nil, status.Errorf(codes.InvalidArgument, "snapshot %q is part of a group: delete its volume group snapshot", req.GetSnapshotId())
		case codes.NotFound:
			return &csi.DeleteSnapshotResponse{}, nil
		default:
			return nil, err
		}
	}
	if err := d.removeSnapshot(ctx, s, cred, cl, sid); err != nil {
		return nil, err
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

func (c *controller) GetSnapshot(ctx context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	if req.GetSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot ID is required")
	}
	snap, err := c.d.snapshotByID(ctx, req.GetSnapshotId(), req.GetSecrets())
	if err != nil {
		return nil, err
	}
	return &csi.GetSnapshotResponse{Snapshot: snap}, nil
}

// snapshotByID looks a snapshot up; NOT_FOUND if it cannot or does not
// exist.
func (d *Driver) snapshotByID(ctx context.Context, id string, secrets map[string]string) (*csi.Snapshot, error) {
	h, err := parseSnapshotHandle(id)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "snapshot %q not found: %v", id, err)
	}
	cl, cred, s, err := d.open(ctx, h.clusterID(), secrets, reading)
	if err != nil {
		return nil, err
	}
	if h.cephcsi != nil {
		r, err := findCephCSISnapshot(ctx, s, cl, *h.cephcsi, cred)
		if err != nil {
			return nil, err
		}
		return cephCSISnapshotMessage(h, r), nil
	}
	sid := h.native
	o, sn, err := findSnapshot(ctx, s, sid, cred)
	if err != nil {
		return nil, err
	}
	snap, ok := snapshotEntry(cl, sid.Pool, sid.Namespace, o.info, sn)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "snapshot %q not found", id)
	}
	if e := o.cephcsi; e != nil && !e.Snapshot && e.Namespace == cl.Namespace {
		// A snapshot of a ceph-csi volume: its source is known to the CO
		// by its ceph-csi handle.
		snap.SourceVolumeId = e.handle(cl)
	}
	return snap, nil
}

func (c *controller) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	d := c.d
	if req.GetMaxEntries() < 0 {
		return nil, status.Error(codes.InvalidArgument, "max entries is negative")
	}
	after, err := decodeToken(req.GetStartingToken(), func(s string) bool { _, err := parseSnapshotHandle(s); return err == nil })
	if err != nil {
		return nil, err
	}
	var pg page[*csi.ListSnapshotsResponse_Entry]
	add := func(sn *csi.Snapshot) { pg.add(sn.GetSnapshotId(), &csi.ListSnapshotsResponse_Entry{Snapshot: sn}) }
	switch {
	case req.GetSnapshotId() != "":
		snap, err := d.snapshotByID(ctx, req.GetSnapshotId(), req.GetSecrets())
		switch {
		case status.Code(err) == codes.NotFound:
		case err != nil:
			return nil, err
		default:
			add(snap)
		}
	case req.GetSourceVolumeId() != "":
		vid, cred, s, info, err := d.volumeByID(ctx, req.GetSourceVolumeId(), req.GetSecrets(), reading)
		switch {
		case status.Code(err) == codes.NotFound:
		case err != nil:
			return nil, err
		default:
			cl, _ := d.cluster(vid.ClusterID)
			// The source as the CO names it (a ceph-csi volume's handle
			// differs from the ID purerbd would give its image).
			addFrom := func(sn *csi.Snapshot) {
				sn.SourceVolumeId = req.GetSourceVolumeId()
				add(sn)
			}
			if err := d.addSnapshots(ctx, s, cred, cl, vid.Pool, vid.Namespace, info, addFrom); err != nil {
				return nil, err
			}
			if h, _ := parseVolumeHandle(req.GetSourceVolumeId()); h.cephcsi != nil {
				if err := d.addCephCSISnapshotsOf(ctx, s, cred, cl, vid, add); err != nil {
					return nil, err
				}
			}
		}
	default:
		credFor := func(cl Cluster) (Credentials, error) {
			if len(req.GetSecrets()) > 0 {
				return d.credentials(req.GetSecrets(), cl.ID, reading)
			}
			return d.pluginCredentials(cl)
		}
		err := d.scanImages(ctx, credFor, func(s Session, cred Credentials, im scanned) error {
			if !hasManagedShape(im.name) {
				o, ok, err := listedCephCSI(ctx, s, im)
				if err != nil {
					return storeError(err, cred, "image %s", im.name)
				}
				if !ok {
					return nil
				}
				return d.addCephCSISnapshots(ctx, s, cred, im, o, add)
			}
			o, err := ownedImage(ctx, s, ImageRef{Pool: im.pool, Namespace: im.ns, Name: im.name})
			if errors.Is(err, ErrNotFound) {
				return nil // removed since the listing, or not the driver's
			}
			if err != nil {
				return storeError(err, cred, "image %s", im.name)
			}
			return d.addSnapshots(ctx, s, cred, im.cluster, im.pool, im.ns, o.info, add)
		})
		if err != nil {
			return nil, err
		}
	}
	entries, next := pg.take(after, req.GetMaxEntries())
	return &csi.ListSnapshotsResponse{Entries: entries, NextToken: next}, nil
}

// addSnapshots adds an image's CSI snapshots.
func (d *Driver) addSnapshots(ctx context.Context, s Session, cred Credentials, cl Cluster, pool int64, ns string, info ImageInfo, add func(*csi.Snapshot)) error {
	snaps, err := s.ListSnapshots(ctx, ImageRef{Pool: pool, Namespace: ns, Name: info.Name})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return storeError(err, cred, "snapshots of %s", info.Name)
	}
	for _, sn := range snaps {
		if !isManagedName(sn.Name) {
			continue
		}
		if snap, ok := snapshotEntry(cl, pool, ns, info, sn); ok {
			add(snap)
		}
	}
	return d.addMemberSnapshots(ctx, s, cred, cl, pool, ns, info, add)
}
