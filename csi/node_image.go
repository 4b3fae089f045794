package csi

import (
	"context"

	"github.com/purerbd/purerbd/nbd/rbdnbd"
)

// ImageOpener opens the image behind a volume for the node service. The
// production implementation sits on packages rados and rbd; tests use
// files.
type ImageOpener interface {
	// OpenImage opens vol's image on cluster c as cred. Errors wrap the
	// ImageStore sentinels (ErrNotFound, ErrUnauthenticated,
	// ErrUnavailable...) so that they map to gRPC codes.
	OpenImage(ctx context.Context, c Cluster, cred Credentials, vol VolumeID, opts OpenImageOptions) (NodeImage, error)
}

// OpenImageOptions say how the node uses an image.
type OpenImageOptions struct {
	// ReadOnly opens without writing anything (reader-only access
	// modes); no lock is taken.
	ReadOnly bool
	// Exclusive is set for single-node writers: take the image's
	// exclusive lock at open rather than at the first write. The lock
	// must stay cooperative (handed over on request, taken back at the
	// next write), as krbd and rbd-nbd without --exclusive keep it: the
	// controller's resize and snapshots of a staged volume need it for a
	// moment, and a lock that is refused (rbd.LockRefuse) makes them fail
	// with EROFS. Without Exclusive (multi-node block volumes) the lock
	// is taken at the first write.
	Exclusive bool
	// Node is the ID of the node staging a single writer (Exclusive).
	// The opener refuses, with an error wrapping ErrBusy (NodeStage
	// answers FAILED_PRECONDITION), while a live stage of another node
	// holds the image, and records this node's claim until the image is
	// closed; a claim of the same node (a restarted plugin) is taken
	// over. This, not the lock, keeps two nodes from writing at once.
	Node string
}

// NodeImage is an open image: *rbd.Image, or what wraps one, with the
// methods the node serves it by over NBD (rbdnbd.Image: data, flush,
// discard, write zeroes, allocation, size notifications) and Close.
// Optionally it also has:
//
//   - Refresh(ctx) error: reread the image's header (its size after a
//     ControllerExpandVolume); also used to tell whether the cluster is
//     reachable for NodeGetVolumeHealth;
//   - CloseContext(ctx) error, preferred over Close.
//
// Its methods must be safe for concurrent use: the NBD server calls them
// from one goroutine per request.
type NodeImage interface {
	rbdnbd.Image
	Close() error
}

type imageRefresher interface {
	Refresh(ctx context.Context) error
}

type contextCloser interface {
	CloseContext(ctx context.Context) error
}

// closeImage closes img, within ctx when it can.
func closeImage(ctx context.Context, img NodeImage) error {
	if c, ok := img.(contextCloser); ok {
		return c.CloseContext(ctx)
	}
	return img.Close()
}
