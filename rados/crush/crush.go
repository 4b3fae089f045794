// Package crush decodes Ceph CRUSH maps (the CrushWrapper encoding carried
// inside every OSDMap) and computes placements with them exactly as Ceph's
// own mapper does: the same rjenkins hashes, the same fixed-point
// logarithm for straw2, the same retry and collision rules for firstn and
// indep choices, the same tunables and per-pool weight sets (choose_args).
//
// A decoded Map is immutable and safe for concurrent use; every call to
// DoRule works in its own scratch space.
package crush

// Bucket algorithms (crush_algorithm).
const (
	AlgUniform = 1
	AlgList    = 2
	AlgTree    = 3
	AlgStraw   = 4
	AlgStraw2  = 5
)

// Rule step opcodes (crush_opcodes).
const (
	OpNoop                   = 0
	OpTake                   = 1
	OpChooseFirstN           = 2
	OpChooseIndep            = 3
	OpEmit                   = 4
	OpChooseLeafFirstN       = 6
	OpChooseLeafIndep        = 7
	OpSetChooseTries         = 8
	OpSetChooseLeafTries     = 9
	OpSetChooseLocalTries    = 10
	OpSetChooseLocalFallback = 11
	OpSetChooseLeafVaryR     = 12
	OpSetChooseLeafStable    = 13
	OpSetMSRDescents         = 14
	OpSetMSRCollisionTries   = 15
	OpChooseMSR              = 16
)

const (
	crushMagic              uint32 = 0x00010000
	legacyAllowedBucketAlgs        = 1<<AlgUniform | 1<<AlgList | 1<<AlgStraw
)

// Rule types as Ceph's pools use them.
const (
	RuleTypeReplicated = 1
	RuleTypeErasure    = 3
	RuleTypeMSRFirstN  = 4
	RuleTypeMSRIndep   = 5
)

// ItemNone marks a position no device could be found for (indep rules
// keep such holes so that positions stay stable).
const ItemNone int32 = 0x7fffffff

// itemUndef is the mapper's internal "not chosen yet" marker.
const itemUndef int32 = 0x7ffffffe

// HashRjenkins1 is the only hash CRUSH defines.
const HashRjenkins1 = 0

// DefaultChooseArgs is the choose_args index used when a pool has no
// weight set of its own.
const DefaultChooseArgs int64 = -1

// AlgName returns Ceph's name for a bucket algorithm.
func AlgName(alg uint8) string {
	switch alg {
	case AlgUniform:
		return "uniform"
	case AlgList:
		return "list"
	case AlgTree:
		return "tree"
	case AlgStraw:
		return "straw"
	case AlgStraw2:
		return "straw2"
	}
	return "unknown"
}
