package osdmap

import (
	"fmt"
	"math"

	"github.com/purerbd/purerbd/rados/denc"
)

// poolMaxVersion is the newest pg_pool_t encoding understood (Tentacle).
const poolMaxVersion = 32

// DecodePool decodes one pg_pool_t encoding (as a whole buffer).
func DecodePool(b []byte) (*Pool, error) {
	d := denc.NewDecoder(b)
	p := decodePool(d)
	d.End("pg_pool_t trailing bytes")
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("osdmap: decode pool: %w", err)
	}
	return p, nil
}

func decodePool(d *denc.Decoder) *Pool {
	p := &Pool{}
	// Version 5 introduced the compat byte and the length.
	d.VersionedLegacy("pg_pool_t", poolMaxVersion, 5, 5, 0, func(d *denc.Decoder, v uint8) {
		p.decodeBody(d, v)
	})
	if d.Err() != nil {
		return nil
	}
	p.calcMasks()
	return p
}

func (p *Pool) decodeBody(d *denc.Decoder, v uint8) {
	p.Version = v
	p.Type = d.U8("pool type")
	p.Size = d.U8("pool size")
	p.CrushRule = d.U8("pool crush_rule")
	p.ObjectHash = d.U8("pool object_hash")
	p.PGNum = d.U32("pool pg_num")
	p.PGPNum = d.U32("pool pgp_num")
	d.U32("pool lpg_num")
	d.U32("pool lpgp_num")
	p.LastChange = d.U32("pool last_change")
	p.SnapSeq = d.U64("pool snap_seq")
	p.SnapEpoch = d.U32("pool snap_epoch")

	if v >= 3 {
		p.Snaps = decodePoolSnaps(d, d.Count("pool snaps", poolSnapLen))
		p.RemovedSnaps = decodeIntervals(d, "pool removed_snaps")
		p.AUID = d.U64("pool auid")
	} else {
		n := d.Count("pool snaps", poolSnapLen)
		m := d.Count("pool removed_snaps", 16)
		p.AUID = d.U64("pool auid")
		p.Snaps = decodePoolSnaps(d, n)
		p.RemovedSnaps = decodeIntervalsN(d, "pool removed_snaps", m)
	}
	if v >= 4 {
		p.Flags = d.U64("pool flags")
		d.U32("pool crash_replay_interval")
	}
	// Upgrade path for pools predating the snap-mode flags.
	if p.SnapSeq > 0 && p.Flags&(PoolFlagSelfManagedSnaps|PoolFlagPoolSnaps) == 0 {
		if len(p.RemovedSnaps) > 0 {
			p.Flags |= PoolFlagSelfManagedSnaps
		} else {
			p.Flags |= PoolFlagPoolSnaps
		}
	}
	if v >= 7 {
		p.MinSize = d.U8("pool min_size")
	} else {
		p.MinSize = p.Size - p.Size/2
	}
	if v >= 8 {
		p.QuotaMaxBytes = d.U64("pool quota_max_bytes")
		p.QuotaMaxObjects = d.U64("pool quota_max_objects")
	}
	p.TierOf, p.ReadTier, p.WriteTier = -1, -1, -1
	if v >= 9 {
		p.Tiers = denc.List(d, "pool tiers", 8, func(d *denc.Decoder) uint64 { return d.U64("pool tier") })
		p.TierOf = d.I64("pool tier_of")
		p.CacheMode = d.U8("pool cache_mode")
		p.ReadTier = d.I64("pool read_tier")
		p.WriteTier = d.I64("pool write_tier")
	}
	if v >= 10 {
		p.Properties = decodeStringMap(d, "pool properties")
	}
	if v >= 11 {
		d.Versioned("HitSet::Params", 1, func(d *denc.Decoder, _ uint8) {
			p.HitSetParams.Type = d.U8("hit_set type")
			if p.HitSetParams.Type > 3 {
				d.Failf("hit_set type", "unknown HitSet type %d", p.HitSetParams.Type)
				return
			}
			p.HitSetParams.Raw = append([]byte(nil), d.Rest()...)
			d.Skip("hit_set params", d.Remaining())
		})
		p.HitSetPeriod = d.U32("pool hit_set_period")
		p.HitSetCount = d.U32("pool hit_set_count")
	}
	if v >= 12 {
		p.StripeWidth = d.U32("pool stripe_width")
	}
	if v >= 13 {
		p.TargetMaxBytes = d.U64("pool target_max_bytes")
		p.TargetMaxObjects = d.U64("pool target_max_objects")
		p.CacheTargetDirtyRatioMicro = d.U32("pool cache_target_dirty_ratio_micro")
		p.CacheTargetFullRatioMicro = d.U32("pool cache_target_full_ratio_micro")
		p.CacheMinFlushAge = d.U32("pool cache_min_flush_age")
		p.CacheMinEvictAge = d.U32("pool cache_min_evict_age")
	}
	if v >= 14 {
		p.ErasureCodeProfile = d.String("pool erasure_code_profile")
	}
	if v >= 15 {
		p.LastForceOpResendPreluminous = d.U32("pool last_force_op_resend_preluminous")
	}
	p.MinReadRecencyForPromote = 1
	if v >= 16 {
		p.MinReadRecencyForPromote = d.U32("pool min_read_recency_for_promote")
	}
	if v >= 17 {
		p.ExpectedNumObjects = d.U64("pool expected_num_objects")
	}
	p.CacheTargetDirtyHighRatioMicro = p.CacheTargetDirtyRatioMicro
	if v >= 19 {
		p.CacheTargetDirtyHighRatioMicro = d.U32("pool cache_target_dirty_high_ratio_micro")
	}
	p.MinWriteRecencyForPromote = 1
	if v >= 20 {
		p.MinWriteRecencyForPromote = d.U32("pool min_write_recency_for_promote")
	}
	if v >= 21 {
		p.UseGMTHitSet = d.Bool("pool use_gmt_hitset")
	}
	if v >= 22 {
		p.FastRead = d.Bool("pool fast_read")
	}
	p.HitSetSearchLastN = 1
	if v >= 23 {
		p.HitSetGradeDecayRate = d.U32("pool hit_set_grade_decay_rate")
		p.HitSetSearchLastN = d.U32("pool hit_set_search_last_n")
	}
	if v >= 24 {
		p.Opts = decodePoolOpts(d)
	}
	p.LastForceOpResendPrenautilus = p.LastForceOpResendPreluminous
	if v >= 25 {
		p.LastForceOpResendPrenautilus = d.U32("pool last_force_op_resend_prenautilus")
	}
	if v >= 26 {
		p.ApplicationMetadata = denc.Map(d, "pool application_metadata", 8,
			func(d *denc.Decoder) (string, map[string]string) {
				return d.String("application"), decodeStringMap(d, "application metadata")
			})
	}
	if v >= 27 {
		p.CreateTime.Decode(d)
	}
	if v >= 28 {
		p.PGNumTarget = d.U32("pool pg_num_target")
		p.PGPNumTarget = d.U32("pool pgp_num_target")
		p.PGNumPending = d.U32("pool pg_num_pending")
		oldStarted := d.U32("pool pg_num_dec_last_epoch_started")
		oldClean := d.U32("pool pg_num_dec_last_epoch_clean")
		p.LastForceOpResend = d.U32("pool last_force_op_resend")
		p.PGAutoscaleMode = d.U8("pool pg_autoscale_mode")
		if v >= 29 {
			p.LastPGMergeMeta = decodePGMergeMeta(d)
		} else {
			p.LastPGMergeMeta.LastEpochClean = oldClean
			p.LastPGMergeMeta.LastEpochStarted = oldStarted
		}
	} else {
		p.PGNumTarget = p.PGNum
		p.PGPNumTarget = p.PGPNum
		p.PGNumPending = p.PGNum
		p.LastForceOpResend = p.LastForceOpResendPrenautilus
		p.PGAutoscaleMode = 1 // warn, on upgrade
	}
	p.PeeringCrushMandatoryMember = crushItemNone
	if v == 30 {
		p.PeeringCrushBucketCount = d.U32("pool peering_crush_bucket_count")
		p.PeeringCrushBucketTarget = d.U32("pool peering_crush_bucket_target")
		p.PeeringCrushBucketBarrier = d.U32("pool peering_crush_bucket_barrier")
		p.PeeringCrushMandatoryMember = d.I32("pool peering_crush_mandatory_member")
	}
	if v >= 31 && d.Bool("pool peering_crush_data present") {
		p.PeeringCrushBucketCount = d.U32("pool peering_crush_bucket_count")
		p.PeeringCrushBucketTarget = d.U32("pool peering_crush_bucket_target")
		p.PeeringCrushBucketBarrier = d.U32("pool peering_crush_bucket_barrier")
		p.PeeringCrushMandatoryMember = d.I32("pool peering_crush_mandatory_member")
	}
	if v >= 32 {
		p.NonprimaryShards[0] = decodeVarint(d, "pool nonprimary_shards")
		p.NonprimaryShards[1] = decodeVarint(d, "pool nonprimary_shards")
	}
	if v >= 5 {
		endOfKnown(d, "pg_pool_t", v, poolMaxVersion)
	}
}

// poolSnapLen is the smallest encoding of one entry of a pool's snaps: the
// snap id and a pool_snap_info_t.
const poolSnapLen = 8 + denc.MinPoolSnapInfoLen

func decodePoolSnaps(d *denc.Decoder, n int) map[uint64]denc.PoolSnapInfo {
	if d.Err() != nil || n == 0 {
		return nil
	}
	m := make(map[uint64]denc.PoolSnapInfo, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		id := d.U64("pool snap id")
		var s denc.PoolSnapInfo
		s.Decode(d)
		m[id] = s
	}
	return m
}

func decodePoolOpts(d *denc.Decoder) []PoolOpt {
	var opts []PoolOpt
	d.Versioned("pool_opts_t", 2, func(d *denc.Decoder, v uint8) {
		opts = denc.List(d, "pool opts", 8, func(d *denc.Decoder) PoolOpt {
			o := PoolOpt{Key: d.I32("pool opt key"), Type: d.I32("pool opt type")}
			switch o.Type {
			case PoolOptString:
				o.Str = d.String("pool opt string")
			case PoolOptInt:
				if v >= 2 {
					o.Int = d.I64("pool opt int")
				} else {
					o.Int = int64(d.I32("pool opt int"))
				}
			case PoolOptDouble:
				o.Float = math.Float64frombits(d.U64("pool opt double"))
			default:
				d.Failf("pool opt type", "unknown option type %d", o.Type)
			}
			return o
		})
	})
	return opts
}

func decodePGMergeMeta(d *denc.Decoder) PGMergeMeta {
	var m PGMergeMeta
	d.Versioned("pg_merge_meta_t", 1, func(d *denc.Decoder, _ uint8) {
		m.SourcePGID.Decode(d)
		m.ReadyEpoch = d.U32("pg_merge_meta_t ready_epoch")
		m.LastEpochStarted = d.U32("pg_merge_meta_t last_epoch_started")
		m.LastEpochClean = d.U32("pg_merge_meta_t last_epoch_clean")
		m.SourceVersion.Decode(d)
		m.TargetVersion.Decode(d)
	})
	return m
}

// decodeVarint reads Ceph's denc_varint: 7 bits per byte, least
// significant first, high bit set on all but the last byte.
func decodeVarint(d *denc.Decoder, what string) uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			d.Failf(what, "varint longer than 64 bits")
			return 0
		}
		b := d.U8(what)
		if d.Err() != nil {
			return 0
		}
		v |= uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			return v
		}
	}
}

func decodeStringMap(d *denc.Decoder, what string) map[string]string {
	return denc.Map(d, what, 8, func(d *denc.Decoder) (string, string) {
		return d.String(what + " key"), d.String(what + " value")
	})
}
