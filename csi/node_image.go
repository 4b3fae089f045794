package csi

import (
	"context"

	"github.com/purerbd/purerbd/nbd"
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

// NodeImage is an open image. *rbd.Image has these methods. Optionally
// it also has:
//
//   - Refresh(ctx) error: reread the image's header (its size after a
//     ControllerExpandVolume); also used to tell whether the cluster is
//     reachable for NodeGetVolumeHealth;
//   - CloseContext(ctx) error, preferred over Close;
//   - NotifySize(func(int64)) (cancel func()): size changes made
//     elsewhere, which then reach the kernel without waiting for
//     NodeExpandVolume.
//
// Its methods must be safe for concurrent use: the NBD server calls them
// from one goroutine per request.
type NodeImage interface {
	ReadAtContext(ctx context.Context, p []byte, off int64) (int, error)
	WriteAtContext(ctx context.Context, p []byte, off int64) (int, error)
	Size() int64
	Flush(ctx context.Context) error
	Discard(ctx context.Context, off, length int64) error
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

// imageBackend serves a NodeImage over NBD. One image is shared by every
// connection of the device, so it is coherent across them.
type imageBackend struct {
	img      NodeImage
	readOnly bool
}

var (
	_ nbd.Backend           = (*imageBackend)(nil)
	_ nbd.Flusher           = (*imageBackend)(nil)
	_ nbd.Trimmer           = (*imageBackend)(nil)
	_ nbd.MultiConnCoherent = (*imageBackend)(nil)
	_ nbd.ReadOnlyBackend   = (*imageBackend)(nil)
	_ nbd.SizeNotifier      = (*imageBackend)(nil)
)

func (b *imageBackend) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return b.img.ReadAtContext(ctx, p, off)
}

func (b *imageBackend) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if b.readOnly {
		return 0, nbd.ErrPerm
	}
	return b.img.WriteAtContext(ctx, p, off)
}

func (b *imageBackend) Size() int64                     { return b.img.Size() }
func (b *imageBackend) Flush(ctx context.Context) error { return b.img.Flush(ctx) }
func (b *imageBackend) MultiConnCoherent() bool         { return true }
func (b *imageBackend) ReadOnly() bool                  { return b.readOnly }

func (b *imageBackend) Trim(ctx context.Context, off, length int64) error {
	if b.readOnly {
		return nbd.ErrPerm
	}
	return b.img.Discard(ctx, off, length)
}

// NotifySize forwards the image's size notifications, if it has any.
func (b *imageBackend) NotifySize(fn func(size int64)) (cancel func()) {
	if n, ok := b.img.(nbd.SizeNotifier); ok {
		return n.NotifySize(fn)
	}
	return func() {}
}
