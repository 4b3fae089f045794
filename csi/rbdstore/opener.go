package rbdstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/rbd"
)

var _ csi.ImageOpener = (*Store)(nil)

// OpenImage opens a volume's image for the node service, on the cached
// connection of its cluster and user; the connection stays open while
// the image is. A single writer (opts.Exclusive) takes the exclusive lock
// at once but keeps it cooperative, as krbd and rbd-nbd without
// --exclusive do: the controller's resizes and snapshots of a volume in
// use need the lock for a moment, and refusing it would fail them.
func (s *Store) OpenImage(ctx context.Context, c csi.Cluster, cred csi.Credentials, vol csi.VolumeID, opts csi.OpenImageOptions) (csi.NodeImage, error) {
	conn, e, err := s.conn(ctx, c, cred)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.refs++
	fencing := e.fencing
	e.mu.Unlock()
	release := func() {
		e.mu.Lock()
		e.refs--
		e.lastUsed = time.Now()
		e.mu.Unlock()
	}
	se := &session{conn: conn, log: s.log}
	io, err := se.ioctx(ctx, vol.Pool, vol.Namespace)
	if err != nil {
		release()
		return nil, err
	}
	if s.opts.crushLocation(c) != nil {
		// reads from the nearest replica (read affinity)
		io = io.WithLocalizedReads()
	}
	claim := opts.Exclusive && !opts.ReadOnly && opts.Node != ""
	img, err := rbd.Open(ctx, io, vol.Image, rbd.OpenOptions{
		ReadOnly:    opts.ReadOnly,
		AcquireLock: opts.Exclusive && !opts.ReadOnly && !claim, // claimForNode takes it
		LockPolicy:  rbd.LockCooperative,
		// the previous plugin's locks are taken over at once
		Fencing:      fencing,
		MergeBuffers: &s.mergeBuffers,
		Logger:       s.log.With("cluster", c.ID),
	})
	if err != nil {
		release()
		return nil, mapErr(err)
	}
	oi := &openImage{Image: img, release: release, client: fmt.Sprintf("client.%d", conn.InstanceID())}
	if claim {
		cl := &claimer{img: img, node: opts.Node, log: s.log.With("cluster", c.ID), pause: s.claimPause}
		h, err := cl.claim(ctx, fmt.Sprintf("client.%d", conn.InstanceID()))
		if err != nil {
			oi.CloseContext(context.WithoutCancel(ctx))
			return nil, mapErr(err)
		}
		oi.claimer, oi.claim = cl, h
	}
	return oi, nil
}

// openImage is an *rbd.Image (all its methods, optional ones included)
// that gives its connection back when closed.
type openImage struct {
	*rbd.Image
	once    sync.Once
	release func()
	claimer *claimer   // set when this open claimed its volume for its node
	claim   *heldClaim // what it claimed, until released
	client  string     // this client's entity name, "client.<id>"
}

// Close closes the image.
func (i *openImage) Close() error { return i.CloseContext(context.Background()) }

// CloseContext closes the image within ctx.
func (i *openImage) CloseContext(ctx context.Context) error {
	if i.claim != nil {
		i.claimer.release(ctx, i.claim)
		i.claim = nil
	}
	err := i.Image.CloseContext(ctx)
	i.once.Do(i.release)
	return err
}

// LockState tells the node's metrics and health about the image's
// exclusive lock (csi's lockReporter).
func (i *openImage) LockState() (csi.LockState, bool) {
	st := i.Image.LockStats()
	return csi.LockState{Owner: st.Owner, Handovers: st.Handovers}, st.Enabled
}

// LockHolders lists the clients other than this one that hold the
// image's exclusive lock (csi's lockHolderLister, for volume health).
func (i *openImage) LockHolders(ctx context.Context) ([]string, error) {
	owners, err := i.Image.LockOwners(ctx)
	if err != nil {
		return nil, mapErr(err)
	}
	var l []string
	for _, o := range owners {
		if o.Client != i.client {
			l = append(l, o.Client)
		}
	}
	return l, nil
}

// Metadata returns one image metadata value (csi's imageMetadata: the
// node reads an encrypted volume's state with it); a missing key wraps
// csi.ErrNotFound.
func (i *openImage) Metadata(ctx context.Context, key string) (string, error) {
	v, err := i.Image.MetadataGet(ctx, key)
	return v, mapErr(err)
}

// SetMetadata sets one image metadata value.
func (i *openImage) SetMetadata(ctx context.Context, key, value string) error {
	return mapErr(i.Image.MetadataSet(ctx, key, value))
}
