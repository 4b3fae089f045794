package rbd

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
	"github.com/purerbd/purerbd/rbd/striper"
)

const noSnap = cls.NoSnap

// snapMeta is one snapshot as the header records it; Image.Snapshots
// hands it out as a SnapInfo.
type snapMeta struct {
	ID               uint64
	Name             string
	Size             uint64
	Namespace        cls.SnapshotNamespace
	Timestamp        denc.UTime
	ProtectionStatus uint8 // cls.Unprotected, Unprotecting or Protected
	ChildCount       uint32
	ParentOverlap    uint64 // how much of the parent the snapshot sees (clones)
	Flags            uint64
}

// ParentSpec names a clone's parent snapshot.
type ParentSpec struct {
	PoolID        int64
	PoolNamespace string
	ImageID       string
	SnapID        uint64
}

// header is an image's metadata as read from rbd_header.<id>.
type header struct {
	size       uint64
	order      uint8
	features   Feature
	incompat   Feature
	opFeatures uint64
	prefix     string
	layout     striper.Layout
	dataPool   int64
	flags      uint64
	snapc      denc.SnapContext
	snaps      []snapMeta // newest first, as snapc.Snaps
	parent     *ParentSpec
	overlap    uint64 // head parent overlap
	created    denc.UTime
}

func (h *header) snapByName(name string) (snapMeta, bool) {
	for _, s := range h.snaps {
		if s.Name == name && s.Namespace.Type == cls.NamespaceUser {
			return s, true
		}
	}
	return snapMeta{}, false
}

func (h *header) snapByID(id uint64) (snapMeta, bool) {
	for _, s := range h.snaps {
		if s.ID == id {
			return s, true
		}
	}
	return snapMeta{}, false
}

// optional treats "method or key not there" as absence.
func optional(err error) error {
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOEXEC) {
		return nil
	}
	return err
}

// loadHeader reads the whole header of image id.
func loadHeader(ctx context.Context, o objects, id string, readOnly bool) (*header, error) {
	oid := headerObject(id)
	r := rados.NewReadOp()
	size, features, flags, snapc, prefix := readCall(r, cls.GetSize(noSnap)), readCall(r, cls.GetFeatures(noSnap, readOnly)),
		readCall(r, cls.GetFlags(noSnap)), readCall(r, cls.GetSnapContext()), readCall(r, cls.GetObjectPrefix())
	if err := o.read(ctx, oid, noSnap, r); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("%w: header %s", ErrNotFound, oid)
		}
		return nil, fmt.Errorf("rbd: reading header %s: %w", oid, err)
	}
	h := &header{dataPool: -1}
	var err error
	var f, inc uint64
	if h.size, h.order, err = cls.DecodeGetSize(size.Output); err != nil {
		return nil, err
	}
	if f, inc, err = cls.DecodeGetFeatures(features.Output); err != nil {
		return nil, err
	}
	h.features, h.incompat = Feature(f), Feature(inc)
	if h.flags, err = cls.DecodeU64(flags.Output); err != nil {
		return nil, err
	}
	if h.snapc, err = cls.DecodeGetSnapContext(snapc.Output); err != nil {
		return nil, err
	}
	if h.prefix, err = cls.DecodeString(prefix.Output); err != nil {
		return nil, err
	}
	if h.order < 12 || h.order > 25 {
		return nil, fmt.Errorf("rbd: header %s: invalid order %d", oid, h.order)
	}
	h.layout = striper.Simple(h.order)
	if h.features&FeatureStripingV2 != 0 {
		out, err := call(ctx, o, oid, cls.GetStripeUnitCount())
		if err != nil {
			return nil, fmt.Errorf("rbd: %s: get_stripe_unit_count: %w", oid, err)
		}
		if h.layout.StripeUnit, h.layout.StripeCount, err = cls.DecodeGetStripeUnitCount(out); err != nil {
			return nil, err
		}
		if err := h.layout.Validate(); err != nil {
			return nil, fmt.Errorf("rbd: header %s: %w", oid, err)
		}
	}
	if h.features&FeatureDataPool != 0 {
		out, err := call(ctx, o, oid, cls.GetDataPool())
		if err != nil {
			return nil, fmt.Errorf("rbd: %s: get_data_pool: %w", oid, err)
		}
		if h.dataPool, err = cls.DecodeGetDataPool(out); err != nil {
			return nil, err
		}
	}
	if h.features&FeatureOperations != 0 {
		out, err := call(ctx, o, oid, cls.OpFeaturesGet())
		if err != nil {
			return nil, fmt.Errorf("rbd: %s: op_features_get: %w", oid, err)
		}
		if h.opFeatures, err = cls.DecodeU64(out); err != nil {
			return nil, err
		}
	}
	if out, err := call(ctx, o, oid, cls.GetCreateTimestamp()); optional(err) != nil {
		return nil, fmt.Errorf("rbd: %s: get_create_timestamp: %w", oid, err)
	} else if err == nil {
		h.created, _ = cls.DecodeUTime(out)
	}
	if h.features&FeatureLayering != 0 {
		if err := h.loadParent(ctx, o, oid); err != nil {
			return nil, err
		}
	}
	if err := h.loadSnaps(ctx, o, oid); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *header) loadParent(ctx context.Context, o objects, oid string) error {
	out, err := call(ctx, o, oid, cls.ParentGet())
	if err != nil {
		if optional(err) != nil {
			return fmt.Errorf("rbd: %s: parent_get: %w", oid, err)
		}
		// pre-Nautilus class: the legacy call
		out, err = call(ctx, o, oid, cls.GetParent(noSnap))
		if err != nil {
			return optional(err)
		}
		spec, overlap, err := cls.DecodeGetParent(out)
		if err != nil {
			return err
		}
		if spec.Exists() {
			h.parent = &ParentSpec{PoolID: spec.PoolID, ImageID: spec.ImageID, SnapID: spec.SnapID}
			h.overlap = overlap
		}
		return nil
	}
	spec, err := cls.DecodeParentGet(out)
	if err != nil {
		return err
	}
	if !spec.Exists() {
		return nil
	}
	h.parent = &ParentSpec{PoolID: spec.PoolID, PoolNamespace: spec.PoolNamespace, ImageID: spec.ImageID, SnapID: spec.SnapID}
	out, err = call(ctx, o, oid, cls.ParentOverlapGet(noSnap))
	if err != nil {
		return fmt.Errorf("rbd: %s: parent_overlap_get: %w", oid, err)
	}
	ov, err := cls.DecodeParentOverlapGet(out)
	if err != nil {
		return err
	}
	if ov != nil {
		h.overlap = *ov
	}
	return nil
}

func (h *header) loadSnaps(ctx context.Context, o objects, oid string) error {
	h.snaps = nil
	for _, id := range h.snapc.Snaps {
		r := rados.NewReadOp()
		get, prot := readCall(r, cls.SnapshotGet(id)), readCall(r, cls.GetProtectionStatus(id))
		flags := readCall(r, cls.GetFlags(id))
		if err := o.read(ctx, oid, noSnap, r); err != nil {
			if errors.Is(err, syscall.ENOENT) {
				continue // removed while we listed
			}
			return fmt.Errorf("rbd: %s: snapshot %d: %w", oid, id, err)
		}
		info, err := cls.DecodeSnapshotGet(get.Output)
		if err != nil {
			return err
		}
		ps, err := cls.DecodeGetProtectionStatus(prot.Output)
		if err != nil {
			return err
		}
		fl, err := cls.DecodeU64(flags.Output)
		if err != nil {
			return err
		}
		s := snapMeta{ID: id, Name: info.Name, Size: info.ImageSize, Namespace: info.Namespace,
			Timestamp: info.Timestamp, ProtectionStatus: ps, ChildCount: info.ChildCount, Flags: fl}
		if h.parent != nil {
			if out, err := call(ctx, o, oid, cls.ParentOverlapGet(id)); err == nil {
				if ov, err := cls.DecodeParentOverlapGet(out); err == nil && ov != nil {
					s.ParentOverlap = *ov
				}
			}
		}
		h.snaps = append(h.snaps, s)
	}
	sort.Slice(h.snaps, func(i, j int) bool { return h.snaps[i].ID > h.snaps[j].ID })
	return nil
}

// checkFeatures refuses images with features this package does not
// implement for the access asked for.
func (h *header) checkFeatures(name string, readOnly bool) error {
	if readOnly {
		if bad := h.incompat &^ supportedReadFeatures; bad != 0 {
			return &FeatureError{Image: name, Features: bad, Access: "read-only"}
		}
		return nil
	}
	if bad := h.features &^ supportedWriteFeatures; bad != 0 {
		return &FeatureError{Image: name, Features: bad, Access: "read-write"}
	}
	if h.features&FeatureObjectMap != 0 && h.features&FeatureExclusiveLock == 0 {
		return fmt.Errorf("%w: image %q has object-map without exclusive-lock", ErrUnsupportedFeature, name)
	}
	if h.features&FeatureOperations != 0 {
		if bad := h.opFeatures &^ supportedOpFeatures; bad != 0 {
			return fmt.Errorf("%w: image %q has operation features %#x", ErrUnsupportedFeature, name, bad)
		}
	}
	return nil
}
