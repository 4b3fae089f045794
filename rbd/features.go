package rbd

import (
	"fmt"
	"strings"
)

// Feature is an RBD image feature bit (RBD_FEATURE_*).
type Feature uint64

// Image features.
const (
	FeatureLayering      Feature = 1 << 0
	FeatureStripingV2    Feature = 1 << 1
	FeatureExclusiveLock Feature = 1 << 2
	FeatureObjectMap     Feature = 1 << 3
	FeatureFastDiff      Feature = 1 << 4
	FeatureDeepFlatten   Feature = 1 << 5
	FeatureJournaling    Feature = 1 << 6
	FeatureDataPool      Feature = 1 << 7
	FeatureOperations    Feature = 1 << 8
	FeatureMigrating     Feature = 1 << 9
	FeatureNonPrimary    Feature = 1 << 10
	FeatureDirtyCache    Feature = 1 << 11
)

// DefaultFeatures are librbd's default (rbd_default_features = 61):
// layering, exclusive-lock, object-map, fast-diff, deep-flatten.
const DefaultFeatures = FeatureLayering | FeatureExclusiveLock | FeatureObjectMap | FeatureFastDiff | FeatureDeepFlatten

// FeatureNone asks Create for an image without any feature (a zero
// Features field means DefaultFeatures).
const FeatureNone Feature = 1 << 63

var featureNames = []struct {
	f    Feature
	name string
}{
	{FeatureLayering, "layering"},
	{FeatureStripingV2, "striping"},
	{FeatureExclusiveLock, "exclusive-lock"},
	{FeatureObjectMap, "object-map"},
	{FeatureFastDiff, "fast-diff"},
	{FeatureDeepFlatten, "deep-flatten"},
	{FeatureJournaling, "journaling"},
	{FeatureDataPool, "data-pool"},
	{FeatureOperations, "operations"},
	{FeatureMigrating, "migrating"},
	{FeatureNonPrimary, "non-primary"},
	{FeatureDirtyCache, "dirty-cache"},
}

// Names lists the features set in f by the names `rbd info` prints.
func (f Feature) Names() []string {
	var out []string
	for _, n := range featureNames {
		if f&n.f != 0 {
			out = append(out, n.name)
			f &^= n.f
		}
	}
	for b := 0; f != 0 && b < 64; b++ {
		if f&(1<<b) != 0 {
			out = append(out, fmt.Sprintf("unknown-%d", b))
			f &^= 1 << b
		}
	}
	return out
}

func (f Feature) String() string { return strings.Join(f.Names(), ", ") }

// ParseFeatures parses a comma-separated feature list as `rbd create
// --image-feature` takes it (names or a number).
func ParseFeatures(s string) (Feature, error) {
	var f Feature
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		found := false
		for _, n := range featureNames {
			if n.name == part {
				f |= n.f
				found = true
			}
		}
		if !found {
			var v uint64
			if _, err := fmt.Sscan(part, &v); err != nil {
				return 0, fmt.Errorf("rbd: unknown image feature %q", part)
			}
			f |= Feature(v)
		}
	}
	return f, nil
}

// Features this package can write with.
const supportedWriteFeatures = FeatureLayering | FeatureStripingV2 | FeatureExclusiveLock |
	FeatureObjectMap | FeatureFastDiff | FeatureDeepFlatten | FeatureDataPool | FeatureOperations

// Features this package can read with (read-only opens).
const supportedReadFeatures = supportedWriteFeatures | FeatureJournaling | FeatureNonPrimary

// Operation features (op_features_get), set with FeatureOperations.
const (
	OpFeatureCloneParent uint64 = 1 << 0
	OpFeatureCloneChild  uint64 = 1 << 1
	OpFeatureGroup       uint64 = 1 << 2
	OpFeatureSnapTrash   uint64 = 1 << 3
)

const supportedOpFeatures = OpFeatureCloneParent | OpFeatureCloneChild | OpFeatureGroup | OpFeatureSnapTrash

// Image flags (get_flags).
const (
	FlagObjectMapInvalid uint64 = 1 << 0
	FlagFastDiffInvalid  uint64 = 1 << 1
)
