package csi

// Which image a node stages. A purerbd volume ID names its image itself;
// a ceph-csi handle is resolved through ceph-csi's journal
// (cephcsi_adopt.go); a static volume, as ceph-csi defines it
// (docs/static-pvc.md; internal/rbd/nodeserver.go, the "staticVolume"
// volume attribute, and genVolFromVolumeOptions in rbd_util.go), names
// its image in the volume context and the volume handle:
//
//	staticVolume: "true"   required
//	clusterID              required: the cluster config entry
//	pool                   required: the pool's name
//	imageName              the image; default: the volume handle itself
//	                       (ceph-csi reads imageName for in-tree
//	                       migrated volumes only)
//	radosNamespace         default: the cluster's radosNamespace, which
//	                       is all ceph-csi uses
//
// imageFeatures and mounter, which ceph-csi's documentation asks for,
// do not matter here and are ignored. Static volumes have a node life
// only: no controller call can find them from their handle, as with
// ceph-csi.
//
// The image found is kept in the node state (Record.Image) so that a
// restarted plugin reattaches it without the volume context or the
// journal.

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi/internal/nodestate"
)

// ctxStaticVolume marks a static volume in the volume context.
const ctxStaticVolume = "staticVolume"

// nodeVolumeRef is a NodeStage request's volume before resolution.
type nodeVolumeRef struct {
	handle volumeHandle // unless static
	static bool
	ctx    map[string]string
}

func (r nodeVolumeRef) clusterID() string {
	if r.static {
		return r.ctx[ctxClusterID]
	}
	return r.handle.clusterID()
}

// parseNodeVolume reads a NodeStage request's volume ID and context. A
// malformed ID is NOT_FOUND, a malformed static volume context
// INVALID_ARGUMENT.
func parseNodeVolume(id string, volCtx map[string]string) (nodeVolumeRef, error) {
	if v, ok := volCtx[ctxStaticVolume]; ok {
		static, err := strconv.ParseBool(v)
		if err != nil {
			return nodeVolumeRef{}, status.Errorf(codes.InvalidArgument, "volume context: %s %q is not a boolean", ctxStaticVolume, v)
		}
		if static {
			// The handle becomes the NBD backend cookie, shown in sysfs.
			if err := checkField("static volume handle", id, false); err != nil || len(id) > MaxIDLength {
				return nodeVolumeRef{}, status.Errorf(codes.InvalidArgument, "static volume handle %q: printable ASCII without spaces, at most %d bytes", id, MaxIDLength)
			}
			for _, k := range []string{ctxClusterID, ctxPool} {
				if volCtx[k] == "" {
					return nodeVolumeRef{}, status.Errorf(codes.InvalidArgument, "volume context: a static volume needs %q", k)
				}
			}
			img := volCtx[ctxImageName]
			if img == "" {
				img = id
			}
			if err := checkName("image name", img); err != nil {
				return nodeVolumeRef{}, status.Errorf(codes.InvalidArgument, "static volume: %v", err)
			}
			if err := checkField("namespace", volCtx[ctxNamespace], true); err != nil {
				return nodeVolumeRef{}, status.Errorf(codes.InvalidArgument, "static volume: %v", err)
			}
			return nodeVolumeRef{static: true, ctx: volCtx}, nil
		}
	}
	h, err := parseVolumeHandle(id)
	if err != nil {
		return nodeVolumeRef{}, status.Errorf(codes.NotFound, "volume %q not found: %v", id, err)
	}
	return nodeVolumeRef{handle: h, ctx: volCtx}, nil
}

// resolve finds the image of r on cluster cl: by the journal for a
// ceph-csi handle, by pool name for a static volume.
func (n *NodeServer) resolve(ctx context.Context, id string, r nodeVolumeRef, cl Cluster, cred Credentials) (VolumeID, error) {
	if !r.static && r.handle.cephcsi == nil {
		return r.handle.native, nil
	}
	if n.cfg.Store == nil {
		return VolumeID{}, status.Errorf(codes.FailedPrecondition, "volume %q: this node plugin cannot read ceph-csi volumes or static volumes (no store)", id)
	}
	s, err := n.cfg.Store.Session(ctx, cl, cred)
	if err != nil {
		return VolumeID{}, storeError(err, cred, "cluster %q", cl.ID)
	}
	return resolveNodeVolume(ctx, s, cl, cred, id, r)
}

// ResolveVolume returns the image NodeStageVolume would stage for a
// volume ID and volume context on cluster cl: a purerbd volume, a
// ceph-csi volume (through ceph-csi's journal) or a static volume. Its
// errors carry the gRPC codes NodeStageVolume returns.
func ResolveVolume(ctx context.Context, s Session, cl Cluster, id string, volumeContext map[string]string) (VolumeID, error) {
	r, err := parseNodeVolume(id, volumeContext)
	if err != nil {
		return VolumeID{}, err
	}
	if r.clusterID() != cl.ID {
		return VolumeID{}, status.Errorf(codes.InvalidArgument, "volume %q is in cluster %q, not %q", id, r.clusterID(), cl.ID)
	}
	return resolveNodeVolume(ctx, s, cl, Credentials{}, id, r)
}

func resolveNodeVolume(ctx context.Context, s Session, cl Cluster, cred Credentials, id string, r nodeVolumeRef) (VolumeID, error) {
	if !r.static {
		vid, _, err := resolveVolume(ctx, s, cl, r.handle)
		if err != nil {
			return VolumeID{}, storeError(err, cred, "volume %q", id)
		}
		return vid, nil
	}
	pool, err := s.LookupPool(ctx, r.ctx[ctxPool])
	if errors.Is(err, ErrNotFound) {
		return VolumeID{}, status.Errorf(codes.NotFound, "static volume %q: pool %q does not exist in cluster %q", id, r.ctx[ctxPool], cl.ID)
	}
	if err != nil {
		return VolumeID{}, storeError(err, cred, "pool %q", r.ctx[ctxPool])
	}
	vid := VolumeID{ClusterID: cl.ID, Pool: pool, Namespace: cl.Namespace, Image: r.ctx[ctxImageName]}
	if ns, ok := r.ctx[ctxNamespace]; ok {
		vid.Namespace = ns
	}
	if vid.Image == "" {
		vid.Image = id
	}
	return vid, nil
}

// recordedVolume is the image a staged volume's record names.
func recordedVolume(rec *nodestate.Record) (VolumeID, error) {
	if im := rec.Image; im != nil {
		v := VolumeID{ClusterID: im.ClusterID, Pool: im.Pool, Namespace: im.Namespace, Image: im.Name}
		if err := v.check(); err != nil {
			return VolumeID{}, fmt.Errorf("image of volume %q: %w", rec.VolumeID, err)
		}
		return v, nil
	}
	return ParseVolumeID(rec.VolumeID)
}

// recordImage is what the record keeps of a resolved image: nothing for
// a purerbd volume ID, which says it all.
func recordImage(r nodeVolumeRef, v VolumeID) *nodestate.Image {
	if !r.static && r.handle.cephcsi == nil {
		return nil
	}
	return &nodestate.Image{ClusterID: v.ClusterID, Pool: v.Pool, Namespace: v.Namespace, Name: v.Image}
}
