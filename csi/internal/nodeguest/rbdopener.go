package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rbd"
)

// rbdOpener opens RBD images with packages rados and rbd, one cluster
// connection per image. (The plugin's production opener belongs with the
// controller's image store, which shares connections.)
type rbdOpener struct {
	log *slog.Logger
}

func (o *rbdOpener) OpenImage(ctx context.Context, c csi.Cluster, cred csi.Credentials, vol csi.VolumeID, opts csi.OpenImageOptions) (csi.NodeImage, error) {
	conn, err := rados.Connect(ctx, rados.Config{
		MonHost: strings.Join(c.Monitors, ","),
		Name:    "client." + cred.ID,
		Key:     cred.Key,
		Logger:  o.log,
	})
	if err != nil {
		return nil, rbdErr(err)
	}
	img, err := o.open(ctx, conn, vol, opts)
	if err != nil {
		conn.Close()
		return nil, rbdErr(err)
	}
	return &rbdImage{Image: img, conn: conn}, nil
}

func (o *rbdOpener) open(ctx context.Context, conn *rados.Conn, vol csi.VolumeID, opts csi.OpenImageOptions) (*rbd.Image, error) {
	pool, ok := conn.OSDMap().PoolNames[vol.Pool]
	if !ok {
		if err := conn.WaitForLatestOSDMap(ctx); err != nil {
			return nil, err
		}
		if pool, ok = conn.OSDMap().PoolNames[vol.Pool]; !ok {
			return nil, fmt.Errorf("pool %d: %w", vol.Pool, rados.ErrPoolNotFound)
		}
	}
	io, err := conn.IOContext(ctx, pool, vol.Namespace)
	if err != nil {
		return nil, err
	}
	// A single writer takes the lock at once. It stays cooperative, as
	// with krbd and rbd-nbd without --exclusive: the controller's resize
	// and snapshots need the lock for a moment, and refusing it
	// (rbd.LockRefuse) would make them fail with EROFS.
	ro := rbd.OpenOptions{ReadOnly: opts.ReadOnly, AcquireLock: opts.Exclusive, LockPolicy: rbd.LockCooperative, Logger: o.log}
	return rbd.Open(ctx, io, vol.Image, ro)
}

// rbdErr adds the csi sentinel an error from rados or rbd stands for.
func rbdErr(err error) error {
	var s error
	switch {
	case errors.Is(err, auth.ErrAuthFailed):
		s = csi.ErrUnauthenticated
	case errors.Is(err, rados.ErrPermissionDenied), errors.Is(err, rados.ErrAccessDenied):
		s = csi.ErrPermission
	case errors.Is(err, rbd.ErrNotFound), errors.Is(err, rados.ErrPoolNotFound), errors.Is(err, rados.ErrNotFound):
		s = csi.ErrNotFound
	case errors.Is(err, rbd.ErrBusy), errors.Is(err, rbd.ErrLockedExternally):
		s = csi.ErrBusy
	case errors.Is(err, rbd.ErrUnsupportedFeature):
		s = csi.ErrUnsupported
	default:
		return err
	}
	return fmt.Errorf("%w: %w", s, err)
}

// rbdImage is an image and the connection it owns.
type rbdImage struct {
	*rbd.Image
	conn *rados.Conn
}

func (i *rbdImage) Close() error { return i.CloseContext(context.Background()) }

func (i *rbdImage) CloseContext(ctx context.Context) error {
	err := i.Image.CloseContext(ctx)
	i.conn.Close()
	return err
}

var _ csi.NodeImage = (*rbdImage)(nil)
