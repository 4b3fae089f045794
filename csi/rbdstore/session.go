package rbdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// reservationObject holds the controller's reservation table (see
// csi.Session.Reservation) in its omap, one per pool and namespace: an
// object purerbd keeps besides RBD's own, named like them.
const reservationObject = "purerbd_csi_reservations"

type session struct {
	conn *rados.Conn
	// snapIDs supplies snapshot ids allocated ahead of use (nil: each
	// snapshot allocates its own)
	snapIDs *rbd.SnapIDReserve
	log     *slog.Logger
}

func (s *session) Ping(ctx context.Context) error {
	return mapErr(s.conn.WaitForLatestOSDMap(ctx))
}

func (s *session) LookupPool(ctx context.Context, name string) (int64, error) {
	id, err := s.conn.LookupPool(ctx, name)
	return id, mapErr(err)
}

func (s *session) PoolName(ctx context.Context, id int64) (string, error) {
	if n, ok := s.conn.OSDMap().PoolNames[id]; ok {
		return n, nil
	}
	if err := s.conn.WaitForLatestOSDMap(ctx); err != nil {
		return "", mapErr(err)
	}
	if n, ok := s.conn.OSDMap().PoolNames[id]; ok {
		return n, nil
	}
	return "", fmt.Errorf("pool %d: %w", id, csi.ErrNotFound)
}

func (s *session) RBDPools(ctx context.Context) ([]int64, error) {
	if err := s.conn.WaitForLatestOSDMap(ctx); err != nil {
		return nil, mapErr(err)
	}
	var ids []int64
	for id, p := range s.conn.OSDMap().Pools {
		if _, ok := p.ApplicationMetadata["rbd"]; ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// PoolAvailable reads MAX AVAIL from `ceph df`; 0 when the cluster has
// no statistics for the pool (without a ceph-mgr it has none).
func (s *session) PoolAvailable(ctx context.Context, id int64) (int64, error) {
	out, _, err := s.conn.MonCommand(ctx, []byte(`{"prefix": "df", "format": "json"}`))
	if err != nil {
		return 0, mapErr(fmt.Errorf("ceph df: %w", err))
	}
	var df struct {
		Pools []struct {
			ID    int64 `json:"id"`
			Stats struct {
				MaxAvail int64 `json:"max_avail"`
			} `json:"stats"`
		} `json:"pools"`
	}
	if err := json.Unmarshal(out, &df); err != nil {
		return 0, fmt.Errorf("ceph df: %w", err)
	}
	for _, p := range df.Pools {
		if p.ID == id {
			return p.Stats.MaxAvail, nil
		}
	}
	return 0, nil // no statistics for this pool (yet, or without a mgr)
}

// ioctx returns an I/O context on a pool's namespace.
func (s *session) ioctx(ctx context.Context, pool int64, ns string) (*rados.IOContext, error) {
	name, err := s.PoolName(ctx, pool)
	if err != nil {
		return nil, err
	}
	io, err := s.conn.IOContext(ctx, name, ns)
	return io, mapErr(err)
}

// checkNamespace fails with csi.ErrNotFound unless ns exists in the pool
// as an RBD namespace (librbd refuses images in unregistered namespaces).
func (s *session) checkNamespace(ctx context.Context, pool int64, ns string) error {
	if ns == "" {
		return nil
	}
	io, err := s.ioctx(ctx, pool, "")
	if err != nil {
		return err
	}
	ok, err := rbd.NamespaceExists(ctx, io, ns)
	if err != nil {
		return mapErr(err)
	}
	if !ok {
		return fmt.Errorf("RBD namespace %q of pool %d (create it with `rbd namespace create`): %w", ns, pool, csi.ErrNotFound)
	}
	return nil
}

func createOptions(o csi.ImageOptions) (rbd.CreateOptions, error) {
	co := rbd.CreateOptions{DataPool: o.DataPool, Order: o.Order, StripeUnit: o.StripeUnit, StripeCount: o.StripeCount}
	if o.Features != nil {
		f, err := rbd.ParseFeatures(strings.Join(o.Features, ","))
		if err != nil {
			return co, fmt.Errorf("%w: %w", csi.ErrUnsupported, err)
		}
		co.Features = f
	}
	return co, nil
}

func (s *session) CreateImage(ctx context.Context, img csi.ImageRef, size uint64, opts csi.ImageOptions) error {
	co, err := createOptions(opts)
	if err != nil {
		return err
	}
	if err := s.checkNamespace(ctx, img.Pool, img.Namespace); err != nil {
		return err
	}
	io, err := s.ioctx(ctx, img.Pool, img.Namespace)
	if err != nil {
		return err
	}
	return mapErr(rbd.Create(ctx, io, img.Name, int64(size), co))
}

func (s *session) CloneImage(ctx context.Context, parent csi.ImageRef, snap string, child csi.ImageRef, opts csi.ImageOptions) error {
	return s.clone(ctx, parent, child, opts, func(pio *rados.IOContext, parentName string, cio *rados.IOContext, co rbd.CreateOptions) error {
		return rbd.Clone(ctx, pio, parentName, snap, cio, child.Name, co)
	})
}

// clone checks and opens what a clone of parent as child needs and
// calls do with it.
func (s *session) clone(ctx context.Context, parent, child csi.ImageRef, opts csi.ImageOptions,
	do func(pio *rados.IOContext, parentName string, cio *rados.IOContext, co rbd.CreateOptions) error) error {
	co, err := createOptions(opts)
	if err != nil {
		return err
	}
	if err := s.checkNamespace(ctx, child.Pool, child.Namespace); err != nil {
		return err
	}
	pio, parentName, err := s.namedImage(ctx, parent)
	if err != nil {
		return err
	}
	cio, err := s.ioctx(ctx, child.Pool, child.Namespace)
	if err != nil {
		return err
	}
	return mapErr(do(pio, parentName, cio, co))
}

// nameOf looks an image's name up by ID in the pool's directory.
// namedImage returns an I/O context on img's namespace and img's name,
// looked up by ID when the reference has none.
func (s *session) namedImage(ctx context.Context, img csi.ImageRef) (*rados.IOContext, string, error) {
	io, err := s.ioctx(ctx, img.Pool, img.Namespace)
	if err != nil {
		return nil, "", err
	}
	if img.Name == "" {
		if img.Name, err = s.nameOf(ctx, io, img.ID); err != nil {
			return nil, "", err
		}
	}
	return io, img.Name, nil
}

func (s *session) nameOf(ctx context.Context, io *rados.IOContext, id string) (string, error) {
	name, err := rbd.ImageName(ctx, io, id)
	return name, mapErr(err)
}

// idOf returns the ID of img, looked up by name when the reference has
// none.
func (s *session) idOf(ctx context.Context, io *rados.IOContext, img csi.ImageRef) (string, error) {
	if img.ID != "" {
		return img.ID, nil
	}
	id, err := rbd.ImageID(ctx, io, img.Name)
	return id, mapErr(err)
}

// open opens an image read-only, by name or ID, and runs f on it.
func (s *session) open(ctx context.Context, img csi.ImageRef, readOnly bool, f func(*rbd.Image) error) error {
	io, err := s.ioctx(ctx, img.Pool, img.Namespace)
	if err != nil {
		return err
	}
	opts := rbd.OpenOptions{ReadOnly: readOnly, SnapIDs: s.snapIDs, Logger: s.log}
	var im *rbd.Image
	if img.Name != "" {
		im, err = rbd.Open(ctx, io, img.Name, opts)
	} else {
		im, err = rbd.OpenByID(ctx, io, img.ID, opts)
	}
	if err != nil {
		return mapErr(err)
	}
	defer func() {
		if cerr := im.CloseContext(context.WithoutCancel(ctx)); cerr != nil {
			s.log.Warn("closing image", "image", im.Name(), "error", cerr.Error())
		}
	}()
	return mapErr(f(im))
}

func (s *session) StatImage(ctx context.Context, img csi.ImageRef) (csi.ImageInfo, error) {
	var info csi.ImageInfo
	err := s.open(ctx, img, true, func(im *rbd.Image) error {
		st, err := im.Stat(ctx)
		if err != nil {
			return err
		}
		info = csi.ImageInfo{Name: st.Name, ID: st.ID, Size: uint64(st.Size)}
		if p := st.Parent; p != nil {
			info.Parent = &csi.ParentInfo{Pool: p.PoolID, Namespace: p.PoolNamespace, ImageID: p.ImageID, SnapID: p.SnapID}
		}
		return nil
	})
	return info, err
}

func (s *session) ListImages(ctx context.Context, pool int64, ns string) ([]string, error) {
	io, err := s.ioctx(ctx, pool, ns)
	if err != nil {
		return nil, err
	}
	entries, err := rbd.List(ctx, io)
	if err != nil {
		return nil, mapErr(err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name
	}
	return names, nil
}

// busyRetries rides out short-lived watchers (another goroutine's
// StatImage opens the image for a moment) before reporting an image
// busy.
var busyRetries = []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, time.Second}

func (s *session) RemoveImage(ctx context.Context, img csi.ImageRef) error {
	io, name, err := s.namedImage(ctx, img)
	if err != nil {
		return err
	}
	for i := 0; ; i++ {
		err = rbd.Remove(ctx, io, name, rbd.RemoveOptions{})
		if !errors.Is(err, rbd.ErrBusy) || i == len(busyRetries) {
			return mapErr(err)
		}
		select {
		case <-ctx.Done():
			return mapErr(err)
		case <-time.After(busyRetries[i]):
		}
	}
}

func (s *session) RenameImage(ctx context.Context, img csi.ImageRef, newName string) error {
	io, name, err := s.namedImage(ctx, img)
	if err != nil {
		return err
	}
	return mapErr(rbd.Rename(ctx, io, name, newName))
}

func (s *session) ResizeImage(ctx context.Context, img csi.ImageRef, size uint64) error {
	return s.open(ctx, img, false, func(im *rbd.Image) error { return im.Resize(ctx, int64(size)) })
}

// Metadata and snapshot renames go to the image's header without
// opening the image: no watch, no lock, as neither needs them.

func (s *session) Metadata(ctx context.Context, img csi.ImageRef, key string) (string, error) {
	io, err := s.ioctx(ctx, img.Pool, img.Namespace)
	if err != nil {
		return "", err
	}
	id, err := s.idOf(ctx, io, img)
	if err != nil {
		return "", fmt.Errorf("metadata %q of %q: %w", key, img.Name, err)
	}
	v, err := rbd.MetadataGet(ctx, io, id, key)
	if err != nil {
		return "", fmt.Errorf("metadata %q of %q: %w", key, img.Name, mapErr(err))
	}
	return v, nil
}

func (s *session) SetMetadata(ctx context.Context, img csi.ImageRef, key, value string) error {
	io, err := s.ioctx(ctx, img.Pool, img.Namespace)
	if err != nil {
		return err
	}
	id, err := s.idOf(ctx, io, img)
	if err != nil {
		return err
	}
	return mapErr(rbd.MetadataSet(ctx, io, id, key, value))
}

func (s *session) SnapshotExtents(ctx context.Context, img csi.ImageRef, fromSnap, snap string, start uint64, fn func(off, length uint64) error) (uint64, error) {
	io, err := s.ioctx(ctx, img.Pool, img.Namespace)
	if err != nil {
		return 0, err
	}
	opts := rbd.OpenOptions{ReadOnly: true, Snapshot: snap, Logger: s.log}
	var im *rbd.Image
	if img.Name != "" {
		im, err = rbd.Open(ctx, io, img.Name, opts)
	} else {
		im, err = rbd.OpenByID(ctx, io, img.ID, opts)
	}
	if err != nil {
		return 0, mapErr(err)
	}
	defer func() {
		if cerr := im.CloseContext(context.WithoutCancel(ctx)); cerr != nil {
			s.log.Warn("closing image", "image", im.Name(), "error", cerr.Error())
		}
	}()
	size := uint64(im.Size())
	if start >= size {
		return size, nil
	}
	err = im.Diff(ctx, int64(start), int64(size-start), rbd.DiffOptions{FromSnap: fromSnap, IncludeParent: fromSnap == ""},
		func(off, length int64, _ bool) error { return fn(uint64(off), uint64(length)) })
	return size, mapErr(err)
}

func (s *session) CreateSnapshot(ctx context.Context, img csi.ImageRef, name string) error {
	return s.open(ctx, img, false, func(im *rbd.Image) error { return im.CreateSnapshot(ctx, name) })
}

func (s *session) ListSnapshots(ctx context.Context, img csi.ImageRef) ([]csi.SnapInfo, error) {
	var out []csi.SnapInfo
	err := s.open(ctx, img, true, func(im *rbd.Image) error {
		snaps, err := im.Snapshots(ctx)
		if err != nil {
			return err
		}
		for _, sn := range snaps {
			if sn.Namespace != rbd.SnapNamespaceUser {
				continue // trash, group and mirror snapshots are not ours
			}
			out = append(out, csi.SnapInfo{ID: sn.ID, Name: sn.Name, Size: uint64(sn.Size), Created: sn.Timestamp})
		}
		return nil
	})
	return out, err
}

func (s *session) RemoveSnapshot(ctx context.Context, img csi.ImageRef, name string) error {
	return s.open(ctx, img, false, func(im *rbd.Image) error { return im.RemoveSnapshot(ctx, name) })
}

func (s *session) RenameSnapshot(ctx context.Context, img csi.ImageRef, oldName, newName string) error {
	io, err := s.ioctx(ctx, img.Pool, img.Namespace)
	if err != nil {
		return err
	}
	id, err := s.idOf(ctx, io, img)
	if err != nil {
		return err
	}
	if err := rbd.RenameSnapshot(ctx, io, id, oldName, newName); err != nil {
		return mapErr(fmt.Errorf("renaming snapshot %s@%s to %q: %w", first(img.Name, img.ID), oldName, newName, err))
	}
	return nil
}

func (s *session) Reservation(ctx context.Context, pool int64, ns, key string) (string, error) {
	io, err := s.ioctx(ctx, pool, ns)
	if err != nil {
		return "", err
	}
	vals, err := io.OmapGetValsByKeys(ctx, reservationObject, []string{key})
	if err != nil && !errors.Is(err, rados.ErrNotFound) {
		return "", mapErr(err)
	}
	v, ok := vals[key]
	if !ok {
		return "", fmt.Errorf("reservation %q: %w", key, csi.ErrNotFound)
	}
	return string(v), nil
}

func (s *session) SetReservation(ctx context.Context, pool int64, ns, key, value string) error {
	io, err := s.ioctx(ctx, pool, ns)
	if err != nil {
		return err
	}
	return mapErr(io.OmapSet(ctx, reservationObject, map[string][]byte{key: []byte(value)}))
}

func (s *session) RemoveReservation(ctx context.Context, pool int64, ns, key string) error {
	io, err := s.ioctx(ctx, pool, ns)
	if err != nil {
		return err
	}
	err = io.OmapRm(ctx, reservationObject, []string{key})
	if errors.Is(err, rados.ErrNotFound) {
		return nil
	}
	return mapErr(err)
}

func (s *session) OmapValues(ctx context.Context, pool int64, ns, object string, keys []string) (map[string]string, error) {
	io, err := s.ioctx(ctx, pool, ns)
	if err != nil {
		return nil, err
	}
	vals, err := io.OmapGetValsByKeys(ctx, object, keys)
	if err != nil {
		return nil, mapErr(fmt.Errorf("object %s: %w", object, err))
	}
	out := make(map[string]string, len(vals))
	for k, v := range vals {
		out[k] = string(v)
	}
	return out, nil
}

func (s *session) RemoveOmapKeys(ctx context.Context, pool int64, ns, object string, keys []string) error {
	io, err := s.ioctx(ctx, pool, ns)
	if err != nil {
		return err
	}
	err = io.OmapRm(ctx, object, keys)
	if errors.Is(err, rados.ErrNotFound) {
		return nil
	}
	return mapErr(err)
}

func (s *session) RemoveObject(ctx context.Context, pool int64, ns, object string) error {
	io, err := s.ioctx(ctx, pool, ns)
	if err != nil {
		return err
	}
	err = io.Remove(ctx, object)
	if errors.Is(err, rados.ErrNotFound) {
		return nil
	}
	return mapErr(err)
}
