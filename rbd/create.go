package rbd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
	"github.com/purerbd/purerbd/rbd/objectmap"
	"github.com/purerbd/purerbd/rbd/striper"
)

// Image creation, removal, renaming and listing, as librbd's
// image/CreateRequest, RemoveRequest and RenameRequest do them.

// CreateOptions shape a new image. The zero value is librbd's default:
// 4 MiB objects, DefaultFeatures, no fancy striping, no data pool.
type CreateOptions struct {
	// Order is log2 of the object size (12..25); 0 means 22.
	Order uint8
	// Features to enable; 0 means DefaultFeatures, FeatureNone none.
	// StripingV2 and DataPool are set or cleared from the options below.
	Features Feature
	// StripeUnit and StripeCount select fancy striping; 0 means the
	// default (unit = object size, count = 1).
	StripeUnit  uint64
	StripeCount uint64
	// DataPool names a pool for the data objects (the header stays in
	// the I/O context's pool).
	DataPool string
}

func validName(name string) error {
	if name == "" || len(name) > maxNameLength || strings.ContainsAny(name, "/@") {
		return fmt.Errorf("%w: image name %q", ErrInvalid, name)
	}
	return nil
}

// Create creates image name of size bytes.
func Create(ctx context.Context, ioc *rados.IOContext, name string, size int64, opts CreateOptions) error {
	if size < 0 {
		return fmt.Errorf("%w: image size %d", ErrInvalid, size)
	}
	o, err := adapt(ioc)
	if err != nil {
		return err
	}
	_, err = create(ctx, o, name, uint64(size), opts, nil)
	return err
}

// createSpec resolves options into what goes into the header.
type createSpec struct {
	order    uint8
	features Feature
	layout   striper.Layout
	dataPool int64
}

func resolveCreate(ctx context.Context, o objects, opts CreateOptions) (createSpec, error) {
	s := createSpec{order: opts.Order, features: opts.Features, dataPool: -1}
	if s.order == 0 {
		s.order = 22
	}
	if s.order < 12 || s.order > 25 {
		return s, fmt.Errorf("%w: order %d (want 12..25)", ErrInvalid, s.order)
	}
	switch s.features {
	case 0:
		s.features = DefaultFeatures
	case FeatureNone:
		s.features = 0
	}
	s.features &^= FeatureNone
	if bad := s.features &^ (supportedWriteFeatures &^ FeatureOperations); bad != 0 {
		return s, &FeatureError{Image: "", Features: bad, Access: "creation"}
	}
	if s.features&(FeatureObjectMap) != 0 && s.features&FeatureExclusiveLock == 0 {
		return s, fmt.Errorf("%w: object-map requires exclusive-lock", ErrInvalid)
	}
	if s.features&FeatureFastDiff != 0 && s.features&FeatureObjectMap == 0 {
		return s, fmt.Errorf("%w: fast-diff requires object-map", ErrInvalid)
	}
	objSize := uint64(1) << s.order
	s.layout = striper.Layout{ObjectSize: objSize, StripeUnit: opts.StripeUnit, StripeCount: opts.StripeCount}
	if s.layout.StripeUnit == 0 {
		s.layout.StripeUnit = objSize
	}
	if s.layout.StripeCount == 0 {
		s.layout.StripeCount = 1
	}
	if err := s.layout.Validate(); err != nil {
		return s, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if s.layout.StripeUnit != objSize || s.layout.StripeCount != 1 {
		s.features |= FeatureStripingV2
	} else {
		s.features &^= FeatureStripingV2
	}
	s.features &^= FeatureDataPool
	if opts.DataPool != "" {
		id, err := o.poolByName(ctx, opts.DataPool)
		if err != nil {
			return s, fmt.Errorf("rbd: data pool %q: %w", opts.DataPool, err)
		}
		if id != o.poolID() {
			s.dataPool = id
			s.features |= FeatureDataPool
		}
	}
	return s, nil
}

// create makes a new image and returns its id. clone, when set, is
// called after the header exists and before the object map is made (it
// attaches the parent).
func create(ctx context.Context, o objects, name string, size uint64, opts CreateOptions,
	clone func(ctx context.Context, id string) error) (string, error) {
	if err := validName(name); err != nil {
		return "", err
	}
	spec, err := resolveCreate(ctx, o, opts)
	if err != nil {
		return "", err
	}
	id := newImageID(o.instanceID())
	idOID := idObject(name)
	// 1. the id object
	err = o.write(ctx, idOID, denc.SnapContext{}, createWith(cls.SetID(id)))
	if errors.Is(err, syscall.EEXIST) {
		return "", fmt.Errorf("%w: image %q", ErrExists, name)
	}
	if err != nil {
		return "", fmt.Errorf("rbd: creating %s: %w", idOID, err)
	}
	undo := []func(){func() { _ = deleteObject(context.WithoutCancel(ctx), o, idOID, denc.SnapContext{}) }}
	fail := func(err error) (string, error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return "", err
	}
	// 2. the directory entry
	err = callWrite(ctx, o, directoryObject, cls.DirAddImage(name, id))
	if errors.Is(err, syscall.EEXIST) {
		return fail(fmt.Errorf("%w: image %q", ErrExists, name))
	}
	if err != nil {
		return fail(fmt.Errorf("rbd: adding %q to %s: %w", name, directoryObject, err))
	}
	undo = append(undo, func() {
		_ = callWrite(context.WithoutCancel(ctx), o, directoryObject, cls.DirRemoveImage(name, id))
	})
	// 3. the header
	hdrOID := headerObject(id)
	err = o.write(ctx, hdrOID, denc.SnapContext{},
		createWith(cls.Create(size, spec.order, uint64(spec.features), dataPrefix+id, spec.dataPool)))
	if err != nil {
		return fail(fmt.Errorf("rbd: creating header %s: %w", hdrOID, err))
	}
	undo = append(undo, func() { _ = deleteObject(context.WithoutCancel(ctx), o, hdrOID, denc.SnapContext{}) })
	if spec.features&FeatureStripingV2 != 0 {
		err := callWrite(ctx, o, hdrOID, cls.SetStripeUnitCount(spec.layout.StripeUnit, spec.layout.StripeCount))
		if err != nil {
			return fail(fmt.Errorf("rbd: setting striping on %s: %w", hdrOID, err))
		}
	}
	if clone != nil {
		if err := clone(ctx, id); err != nil {
			return fail(err)
		}
	}
	// 4. the object map
	if spec.features&FeatureObjectMap != 0 {
		omOID := objectMapObject(id, noSnap)
		err := callWrite(ctx, o, omOID, cls.ObjectMapResize(spec.layout.NumObjects(size), objectmap.Nonexistent))
		if err != nil {
			return fail(fmt.Errorf("rbd: creating object map %s: %w", omOID, err))
		}
	}
	return id, nil
}

// RemoveOptions tune Remove.
type RemoveOptions struct {
	// Force removes even when other clients watch the image (they will
	// see errors).
	Force bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Remove deletes image name and all its data, like `rbd rm`: it refuses
// images with snapshots (ErrHasSnapshots), images in a group
// (ErrInGroup) and images other clients have open (ErrBusy).
func Remove(ctx context.Context, ioc *rados.IOContext, name string, opts RemoveOptions) error {
	o, err := adapt(ioc)
	if err != nil {
		return err
	}
	return remove(ctx, o, name, opts)
}

func remove(ctx context.Context, o objects, name string, opts RemoveOptions) error {
	id, err := imageID(ctx, o, name)
	if errors.Is(err, ErrNotFound) {
		// a dangling directory entry?
		out, derr := call(ctx, o, directoryObject, cls.DirGetID(name))
		if derr != nil {
			return err
		}
		if id, derr = cls.DecodeString(out); derr != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	hdrOID := headerObject(id)
	h, err := loadHeader(ctx, o, id, true)
	switch {
	case errors.Is(err, ErrNotFound):
		h = nil // header gone: clean up the rest
	case err != nil:
		return err
	}
	if h != nil {
		if len(h.snaps) > 0 {
			return fmt.Errorf("%w: %q has %d snapshot(s); remove them first", ErrHasSnapshots, name, len(h.snaps))
		}
		if h.opFeatures&OpFeatureGroup != 0 {
			out, err := call(ctx, o, hdrOID, cls.ImageGroupGet())
			if err != nil && optional(err) != nil {
				return fmt.Errorf("rbd: reading the group of %q: %w", name, err)
			}
			if err == nil {
				if g, err := cls.DecodeImageGroupGet(out); err != nil || g.Valid() {
					// as librbd: EMLINK, remove it from its group first
					return errors.Join(fmt.Errorf("%w: %q: remove it from its group first: %w", ErrInGroup, name, syscall.EMLINK), err)
				}
			}
		}
		if !opts.Force {
			ws, err := o.listWatchers(ctx, hdrOID)
			if err != nil && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("rbd: listing watchers of %q: %w", name, err)
			}
			if len(ws) > 0 {
				return fmt.Errorf("%w: %q has %d watcher(s) (still open somewhere)", ErrBusy, name, len(ws))
			}
		}
		if bad := h.features &^ supportedWriteFeatures; bad != 0 {
			return &FeatureError{Image: name, Features: bad, Access: "removal"}
		}
		data := o
		if h.dataPool >= 0 && h.dataPool != o.poolID() {
			if data, err = o.pool(ctx, h.dataPool, o.namespace()); err != nil {
				return fmt.Errorf("rbd: data pool %d: %w", h.dataPool, err)
			}
		}
		if h.parent != nil {
			if err := detachFromParent(ctx, o, id, h, opts.Logger); err != nil {
				return err
			}
		}
		if err := trimObjects(ctx, o, data, id, h, 0, h.layout.NumObjects(h.size)); err != nil {
			return err
		}
		if h.features&FeatureObjectMap != 0 {
			err := deleteObject(ctx, o, objectMapObject(id, noSnap), denc.SnapContext{})
			if err != nil && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("rbd: removing object map of %q: %w", name, err)
			}
		}
	}
	for _, oid := range []string{hdrOID, idObject(name)} {
		err := deleteObject(ctx, o, oid, denc.SnapContext{})
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rbd: removing %s: %w", oid, err)
		}
	}
	err = callWrite(ctx, o, directoryObject, cls.DirRemoveImage(name, id))
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("rbd: removing %q from %s: %w", name, directoryObject, err)
	}
	return nil
}

// trimObjects removes data objects [from, to) of an image (all that may
// exist: with an object map only those it marks).
func trimObjects(ctx context.Context, meta, data objects, id string, h *header, from, to uint64) error {
	if from >= to {
		return nil
	}
	var bv *objectmap.BitVector
	if h.features&FeatureObjectMap != 0 {
		if out, err := call(ctx, meta, objectMapObject(id, noSnap), cls.ObjectMapLoad()); err == nil {
			bv, _ = cls.DecodeObjectMapLoad(out)
		}
	}
	var todo []uint64
	for n := from; n < to; n++ {
		if bv != nil && n < bv.Len() && bv.Get(n) == objectmap.Nonexistent {
			continue
		}
		todo = append(todo, n)
	}
	return forEach(ctx, len(todo), func(ctx context.Context, i int) error {
		oid := striper.ObjectName(h.prefix, todo[i])
		err := deleteObject(ctx, data, oid, h.snapc)
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rbd: removing %s: %w", oid, err)
		}
		return nil
	})
}

// Rename renames image src to dst.
func Rename(ctx context.Context, ioc *rados.IOContext, src, dst string) error {
	o, err := adapt(ioc)
	if err != nil {
		return err
	}
	if err := validName(dst); err != nil {
		return err
	}
	id, err := imageID(ctx, o, src)
	if err != nil {
		return err
	}
	err = o.write(ctx, idObject(dst), denc.SnapContext{}, createWith(cls.SetID(id)))
	if errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("%w: image %q", ErrExists, dst)
	}
	if err != nil {
		return fmt.Errorf("rbd: creating %s: %w", idObject(dst), err)
	}
	if err := callWrite(ctx, o, directoryObject, cls.DirRenameImage(src, dst, id)); err != nil {
		_ = deleteObject(context.WithoutCancel(ctx), o, idObject(dst), denc.SnapContext{})
		if errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("%w: image %q", ErrExists, dst)
		}
		return fmt.Errorf("rbd: renaming %q in %s: %w", src, directoryObject, err)
	}
	if err := deleteObject(ctx, o, idObject(src), denc.SnapContext{}); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("rbd: removing %s: %w", idObject(src), err)
	}
	notifyHeaderUpdateOf(ctx, o, id)
	return nil
}

// ImageEntry is one image of a pool listing.
type ImageEntry struct {
	Name string
	ID   string
}

// List returns the pool's images (its rbd_directory), by name.
func List(ctx context.Context, ioc *rados.IOContext) ([]ImageEntry, error) {
	o, err := adapt(ioc)
	if err != nil {
		return nil, err
	}
	return listDirectory(ctx, o)
}

// listDirectory reads the whole directory of o's pool and namespace.
func listDirectory(ctx context.Context, o objects) ([]ImageEntry, error) {
	var out []ImageEntry
	start := ""
	for {
		reply, err := call(ctx, o, directoryObject, cls.DirList(start, 1024))
		if errors.Is(err, syscall.ENOENT) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("rbd: listing %s: %w", directoryObject, err)
		}
		entries, err := cls.DecodeDirList(reply)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			out = append(out, ImageEntry{Name: e.Name, ID: e.ID})
		}
		if len(entries) < 1024 {
			return out, nil
		}
		start = entries[len(entries)-1].Name
	}
}
