package rbd

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
	"github.com/purerbd/purerbd/rbd/objectmap"
)

// Turning features on and off after creation, as librbd's
// Operations::update_features with its Enable- and DisableFeaturesRequest
// do (rbd feature enable/disable), for the features whose on-disk state
// this package keeps: exclusive-lock, object-map, fast-diff, and
// deep-flatten (off only). Journaling is refused (ErrUnsupportedFeature),
// the features fixed at creation with ErrInvalid, as librbd does.

const (
	// mutableFeatures may be turned on and off (RBD_FEATURES_MUTABLE).
	mutableFeatures = FeatureExclusiveLock | FeatureObjectMap | FeatureFastDiff | FeatureJournaling
	// disableOnlyFeatures may only be turned off.
	disableOnlyFeatures = FeatureDeepFlatten
)

// EnableFeatures turns features on. object-map needs exclusive-lock
// and brings fast-diff with it (and fast-diff object-map), as librbd
// does; the object maps are created empty and flagged invalid, to be
// rebuilt (rbd object-map rebuild) before the image is written.
func (img *Image) EnableFeatures(ctx context.Context, f Feature) error {
	f, err := img.featureUpdate(ctx, f, true)
	if err != nil {
		return err
	}
	h := img.hdr.Load()
	if f&FeatureObjectMap != 0 && (h.features|f)&FeatureExclusiveLock == 0 {
		return fmt.Errorf("%w: cannot enable object-map: exclusive-lock must be enabled before enabling object-map", ErrInvalid)
	}
	update := func(ctx context.Context, guard []cls.Method) error {
		h := img.hdr.Load()
		var flags uint64
		if f&FeatureObjectMap != 0 {
			flags |= FlagObjectMapInvalid
		}
		if f&FeatureFastDiff != 0 {
			flags |= FlagFastDiffInvalid
		}
		w := newWrite(guard...)
		writeCalls(w, cls.SetFeatures(uint64(f), uint64(f)))
		if flags != 0 {
			writeCalls(w, cls.SetFlags(noSnap, flags, flags))
		}
		if err := img.meta.write(ctx, headerObject(img.id), denc.SnapContext{}, w); err != nil {
			return fmt.Errorf("rbd: enabling features %s of %q: %w", f, img.name, err)
		}
		if f&FeatureObjectMap != 0 {
			for _, snap := range append([]uint64{noSnap}, h.snapc.Snaps...) {
				size := h.size
				if s, ok := h.snapByID(snap); ok {
					size = s.Size
				}
				err := callWrite(ctx, img.meta, objectMapObject(img.id, snap),
					cls.ObjectMapResize(h.layout.NumObjects(size), objectmap.Nonexistent))
				if err != nil {
					return fmt.Errorf("rbd: creating the object map of %q: %w", img.name, err)
				}
			}
		}
		return img.refresh(ctx)
	}
	// the next owner loads the new map (and refuses it until it is
	// rebuilt)
	return img.applyFeatureUpdate(ctx, h, update, f&FeatureObjectMap != 0)
}

// DisableFeatures turns features off. object-map and fast-diff go off
// together (the object maps removed), as with librbd; exclusive-lock
// needs object-map (and journaling) off first.
func (img *Image) DisableFeatures(ctx context.Context, f Feature) error {
	f, err := img.featureUpdate(ctx, f, false)
	if err != nil {
		return err
	}
	h := img.hdr.Load()
	if f&FeatureExclusiveLock != 0 && (h.features&^f)&(FeatureObjectMap|FeatureJournaling) != 0 {
		return fmt.Errorf("%w: cannot disable exclusive-lock: object-map or journaling must be disabled before disabling exclusive-lock",
			ErrInvalid)
	}
	if f&FeatureDeepFlatten != 0 && h.parent != nil && len(h.snapc.Snaps) > 0 {
		return fmt.Errorf("%w: cannot disable deep-flatten of a clone with snapshots", ErrInvalid)
	}
	update := func(ctx context.Context, guard []cls.Method) error {
		h := img.hdr.Load()
		if f&FeatureObjectMap != 0 {
			for _, snap := range append([]uint64{noSnap}, h.snapc.Snaps...) {
				err := deleteObject(ctx, img.meta, objectMapObject(img.id, snap), denc.SnapContext{})
				if err != nil && !errors.Is(err, syscall.ENOENT) {
					return fmt.Errorf("rbd: removing the object map of %q: %w", img.name, err)
				}
			}
			if img.lock != nil {
				if om := img.lock.omap.Swap(nil); om != nil {
					_ = om.close(ctx)
				}
			}
		}
		var flags uint64
		if f&FeatureObjectMap != 0 {
			flags |= FlagObjectMapInvalid
		}
		if f&FeatureFastDiff != 0 {
			flags |= FlagFastDiffInvalid
		}
		w := newWrite(guard...)
		writeCalls(w, cls.SetFeatures(0, uint64(f)))
		if flags != 0 {
			writeCalls(w, cls.SetFlags(noSnap, 0, flags))
		}
		if err := img.meta.write(ctx, headerObject(img.id), denc.SnapContext{}, w); err != nil {
			return fmt.Errorf("rbd: disabling features %s of %q: %w", f, img.name, err)
		}
		return img.refresh(ctx)
	}
	return img.applyFeatureUpdate(ctx, h, update, f&FeatureExclusiveLock != 0)
}

// applyFeatureUpdate runs update under the exclusive lock when the image
// has one (releasing it afterwards with release) and tells the image's
// other clients that the header changed.
func (img *Image) applyFeatureUpdate(ctx context.Context, h *header, update func(ctx context.Context, guard []cls.Method) error, release bool) error {
	var err error
	if h.features&FeatureExclusiveLock != 0 {
		err = img.exclusive(ctx, update)
		if err == nil && release {
			err = img.lock.release(ctx)
		}
	} else {
		err = update(ctx, nil)
	}
	if err != nil {
		return err
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// featureUpdate checks a request as Operations::update_features does
// and returns the features it changes (object-map and fast-diff go
// together where one needs the other).
func (img *Image) featureUpdate(ctx context.Context, f Feature, enable bool) (Feature, error) {
	if img.readOnly {
		return 0, ErrReadOnly
	}
	allowed := mutableFeatures
	if !enable {
		allowed |= disableOnlyFeatures
	}
	if f&^allowed != 0 {
		return 0, fmt.Errorf("%w: cannot update immutable features (%s)", ErrInvalid, f&^allowed)
	}
	h, err := img.header(ctx)
	if err != nil {
		return 0, err
	}
	om, fd := f&FeatureObjectMap != 0, f&FeatureFastDiff != 0
	hasOM, hasFD := h.features&FeatureObjectMap != 0, h.features&FeatureFastDiff != 0
	if enable && (om && !hasFD || fd && !hasOM) || !enable && (om && hasFD || fd && hasOM) {
		f |= FeatureObjectMap | FeatureFastDiff
	}
	switch {
	case f == 0:
		return 0, fmt.Errorf("%w: update requires at least one feature", ErrInvalid)
	case enable && f&h.features != 0:
		return 0, fmt.Errorf("%w: one or more requested features are already enabled", ErrInvalid)
	case !enable && f&^h.features != 0:
		return 0, fmt.Errorf("%w: one or more requested features are already disabled", ErrInvalid)
	case f&FeatureJournaling != 0:
		return 0, fmt.Errorf("%w: journaling", ErrUnsupportedFeature)
	}
	return f, nil
}
