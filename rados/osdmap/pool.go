package osdmap

import (
	"math/bits"

	"github.com/purerbd/purerbd/rados/crush"
	"github.com/purerbd/purerbd/rados/denc"
)

// Pool types.
const (
	PoolTypeReplicated = 1
	PoolTypeErasure    = 3
)

// Pool flags (pg_pool_t::FLAG_*).
const (
	PoolFlagHashPSPool       = 1 << 0
	PoolFlagFull             = 1 << 1
	PoolFlagECOverwrites     = 1 << 2
	PoolFlagIncompleteClones = 1 << 3
	PoolFlagNoDelete         = 1 << 4
	PoolFlagNoPGChange       = 1 << 5
	PoolFlagNoSizeChange     = 1 << 6
	PoolFlagWriteFadviseDN   = 1 << 7
	PoolFlagNoScrub          = 1 << 8
	PoolFlagNoDeepScrub      = 1 << 9
	PoolFlagFullQuota        = 1 << 10
	PoolFlagNearFull         = 1 << 11
	PoolFlagBackfillFull     = 1 << 12
	PoolFlagSelfManagedSnaps = 1 << 13
	PoolFlagPoolSnaps        = 1 << 14
	PoolFlagCreating         = 1 << 15
	PoolFlagEIO              = 1 << 16
	PoolFlagBulk             = 1 << 17
)

// Pool is a decoded pg_pool_t: everything the monitors say about a pool.
type Pool struct {
	Version      uint8 // encoding version it was decoded from
	Type         uint8
	Size         uint8
	MinSize      uint8
	CrushRule    uint8
	ObjectHash   uint8
	PGNum        uint32
	PGPNum       uint32
	LastChange   uint32
	SnapSeq      uint64
	SnapEpoch    uint32
	Snaps        map[uint64]denc.PoolSnapInfo
	RemovedSnaps Intervals // pre-Mimic self-managed snap removals
	AUID         uint64
	Flags        uint64

	QuotaMaxBytes   uint64
	QuotaMaxObjects uint64

	Tiers      []uint64
	TierOf     int64
	CacheMode  uint8
	ReadTier   int64
	WriteTier  int64
	Properties map[string]string

	HitSetParams HitSetParams
	HitSetPeriod uint32
	HitSetCount  uint32
	StripeWidth  uint32

	TargetMaxBytes                 uint64
	TargetMaxObjects               uint64
	CacheTargetDirtyRatioMicro     uint32
	CacheTargetFullRatioMicro      uint32
	CacheMinFlushAge               uint32
	CacheMinEvictAge               uint32
	ErasureCodeProfile             string
	LastForceOpResendPreluminous   uint32
	MinReadRecencyForPromote       uint32
	ExpectedNumObjects             uint64
	CacheTargetDirtyHighRatioMicro uint32
	MinWriteRecencyForPromote      uint32
	UseGMTHitSet                   bool
	FastRead                       bool
	HitSetGradeDecayRate           uint32
	HitSetSearchLastN              uint32
	Opts                           []PoolOpt
	LastForceOpResendPrenautilus   uint32
	ApplicationMetadata            map[string]map[string]string
	CreateTime                     denc.UTime

	PGNumTarget       uint32
	PGPNumTarget      uint32
	PGNumPending      uint32
	LastForceOpResend uint32
	PGAutoscaleMode   uint8
	LastPGMergeMeta   PGMergeMeta

	PeeringCrushBucketCount     uint32
	PeeringCrushBucketTarget    uint32
	PeeringCrushBucketBarrier   uint32
	PeeringCrushMandatoryMember int32

	// NonprimaryShards are the erasure-code shards that may not become
	// primary (Tentacle); bit i set = shard i.
	NonprimaryShards [2]uint64

	pgNumMask, pgpNumMask uint32
}

// HitSetParams is a pool's HitSet::Params: the kind of hit set and the
// kind-specific parameters, kept as encoded.
type HitSetParams struct {
	Type uint8 // 0 none, 1 explicit hash, 2 explicit object, 3 bloom
	Raw  []byte
}

// PoolOpt is one pool option (pool_opts_t): a key and a string, integer
// or floating-point value.
type PoolOpt struct {
	Key   int32
	Type  int32 // 0 string, 1 int, 2 double
	Str   string
	Int   int64
	Float float64
}

// Pool option value types.
const (
	PoolOptString = 0
	PoolOptInt    = 1
	PoolOptDouble = 2
)

// PGMergeMeta is pg_merge_meta_t.
type PGMergeMeta struct {
	SourcePGID       denc.PG
	ReadyEpoch       uint32
	LastEpochStarted uint32
	LastEpochClean   uint32
	SourceVersion    denc.EVersion
	TargetVersion    denc.EVersion
}

// calcMasks sets the pg_num and pgp_num masks: all ones up to the
// highest bit of num-1.
func (p *Pool) calcMasks() {
	p.pgNumMask = mask(p.PGNum)
	p.pgpNumMask = mask(p.PGPNum)
}

func mask(n uint32) uint32 {
	return uint32(uint64(1)<<bits.Len32(n-1) - 1)
}

// PGNumMask returns the mask used by StableMod for pg_num.
func (p *Pool) PGNumMask() uint32 { return p.pgNumMask }

// CanShiftOSDs reports whether a PG's OSD list may be compacted when an
// OSD disappears (replicated pools); erasure-coded pools keep positions.
func (p *Pool) CanShiftOSDs() bool { return p.Type == PoolTypeReplicated }

// StableMod is ceph_stable_mod: x mod b for a b that may not be a power
// of two, stable as b grows.
func StableMod(x, b, bmask uint32) uint32 {
	if x&bmask < b {
		return x & bmask
	}
	return x & (bmask >> 1)
}

// HashKey hashes an object name (or locator key) in a namespace with the
// pool's object hash: the namespace, a 0x1f byte and the key when the
// namespace is not empty.
func (p *Pool) HashKey(key, ns string) uint32 {
	if ns == "" {
		return StrHash(p.ObjectHash, []byte(key))
	}
	buf := make([]byte, 0, len(ns)+1+len(key))
	buf = append(buf, ns...)
	buf = append(buf, 0x1f)
	buf = append(buf, key...)
	return StrHash(p.ObjectHash, buf)
}

// RawPGToPG folds a full-precision placement seed into the pool's pg_num.
func (p *Pool) RawPGToPG(pg denc.PG) denc.PG {
	pg.Seed = StableMod(pg.Seed, p.PGNum, p.pgNumMask)
	return pg
}

// RawPGToPPS returns the placement seed fed to CRUSH: with HASHPSPOOL the
// pgp-folded seed hashed with the pool id, otherwise their sum.
func (p *Pool) RawPGToPPS(pg denc.PG) uint32 {
	ps := StableMod(pg.Seed, p.PGPNum, p.pgpNumMask)
	if p.Flags&PoolFlagHashPSPool != 0 {
		return crush.Hash32_2(crush.HashRjenkins1, ps, uint32(pg.Pool))
	}
	return ps + uint32(pg.Pool)
}

// IsStretch reports whether the pool has stretch-mode peering rules.
func (p *Pool) IsStretch() bool { return p.PeeringCrushBucketCount != 0 }
