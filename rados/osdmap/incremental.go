package osdmap

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/crc32c"
	"github.com/purerbd/purerbd/rados/denc"
)

// Newest Incremental part versions understood (Tentacle).
const (
	incClientVersion = 9
	incOSDVersion    = 12
)

// Allow-crimson mutations carried by an Incremental.
const (
	CrimsonNoChange = 0
	CrimsonSet      = 1
	CrimsonClear    = 2
)

// Incremental is a decoded OSDMap::Incremental: the changes from epoch
// Epoch-1 to Epoch. Fields left at their "no change" value (-1, nil,
// empty) change nothing.
type Incremental struct {
	FSID       denc.UUID
	Epoch      uint32
	Modified   denc.UTime
	NewPoolMax int64 // -1: unchanged
	NewFlags   int32 // -1: unchanged

	// FullMap, when set, replaces the whole map; Crush, when set, replaces
	// the CRUSH map (both as encoded).
	FullMap []byte
	Crush   []byte

	NewMaxOSD                 int32 // -1: unchanged
	NewPools                  map[int64]*Pool
	NewPoolNames              map[int64]string
	OldPools                  []int64
	NewUpClient               map[int32]denc.EntityAddrVec
	NewState                  map[int32]uint32 // XORed into the state (0 means "up")
	NewWeight                 map[int32]uint32
	NewPGTemp                 map[denc.PG][]int32 // empty list removes
	NewPrimaryTemp            map[denc.PG]int32   // -1 removes
	NewPrimaryAffinity        map[int32]uint32
	NewErasureCodeProfiles    map[string]map[string]string
	OldErasureCodeProfiles    []string
	NewPGUpmap                map[denc.PG][]int32
	OldPGUpmap                []denc.PG
	NewPGUpmapItems           map[denc.PG][]UpmapItem
	OldPGUpmapItems           []denc.PG
	NewRemovedSnaps           map[int64]Intervals
	NewPurgedSnaps            map[int64]Intervals
	NewLastUpChange           denc.UTime
	NewLastInChange           denc.UTime
	NewPGUpmapPrimary         map[denc.PG]int32
	OldPGUpmapPrimary         []denc.PG
	NewHBBackUp               map[int32]denc.EntityAddrVec
	NewUpThru                 map[int32]uint32
	NewLastCleanInterval      map[int32][2]uint32
	NewLost                   map[int32]uint32
	NewBlocklist              map[denc.EntityAddr]denc.UTime
	OldBlocklist              []denc.EntityAddr
	NewUpCluster              map[int32]denc.EntityAddrVec
	ClusterSnapshot           string
	NewUUID                   map[int32]denc.UUID
	NewXInfo                  map[int32]OSDXInfo
	NewHBFrontUp              map[int32]denc.EntityAddrVec
	EncodeFeatures            uint64
	NewNearfullRatio          float32 // < 0: unchanged
	NewFullRatio              float32
	NewBackfillfullRatio      float32
	NewRequireMinCompatClient uint8 // 0xff: unchanged
	NewRequireOSDRelease      uint8
	NewCrushNodeFlags         map[int32]uint32
	NewDeviceClassFlags       map[int32]uint32
	ChangeStretchMode         bool
	NewStretchBucketCount     uint32
	NewDegradedStretchMode    uint32
	NewRecoveringStretchMode  uint32
	NewStretchModeBucket      int32
	StretchModeEnabled        bool
	NewRangeBlocklist         map[denc.EntityAddr]denc.UTime
	OldRangeBlocklist         []denc.EntityAddr
	MutateAllowCrimson        uint8

	HaveCRC bool
	IncCRC  uint32 // crc of this incremental's encoding
	FullCRC uint32 // crc of the resulting full map's canonical encoding

	ClientVersion, OSDVersion uint8
}

// DecodeIncremental decodes an OSDMap::Incremental and verifies its crc.
func DecodeIncremental(b []byte) (*Incremental, error) { return decodeIncremental(b, true) }

func decodeIncremental(b []byte, verifyCRC bool) (*Incremental, error) {
	env, err := readWrapper(b, "osdmap incremental", mapWrapperVersion)
	if err != nil {
		return nil, err
	}
	inc := &Incremental{
		NewPoolMax: -1, NewFlags: -1, NewMaxOSD: -1,
		NewNearfullRatio: -1, NewFullRatio: -1, NewBackfillfullRatio: -1,
		NewRequireMinCompatClient: 0xff, NewRequireOSDRelease: 0xff,
	}
	d := denc.NewDecoder(env.body)
	inc.ClientVersion = d.Versioned("incremental client data", incClientVersion, inc.decodeClient)
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("osdmap: decode incremental: %w", err)
	}
	inc.OSDVersion = d.Versioned("incremental osd data", incOSDVersion, inc.decodeOSD)
	if env.version >= 8 {
		crcAt := d.Offset()
		inc.IncCRC = d.U32("incremental inc_crc")
		tailAt := d.Offset()
		inc.FullCRC = d.U32("incremental full_crc")
		if err := d.Err(); err != nil {
			return nil, fmt.Errorf("osdmap: decode incremental: %w", err)
		}
		inc.HaveCRC = true
		actual := crc32c.Checksum(b[:env.hdrLen+crcAt])
		actual = crc32c.Update(actual, env.body[tailAt:])
		if verifyCRC && actual != inc.IncCRC {
			return nil, fmt.Errorf("%w: incremental says %#x, bytes give %#x", ErrBadCRC, inc.IncCRC, actual)
		}
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("osdmap: decode incremental: %w", err)
	}
	return inc, nil
}

func (inc *Incremental) decodeClient(d *denc.Decoder, v uint8) {
	inc.FSID.Decode(d)
	inc.Epoch = d.U32("epoch")
	inc.Modified.Decode(d)
	inc.NewPoolMax = d.I64("new_pool_max")
	inc.NewFlags = d.I32("new_flags")
	inc.FullMap = d.BlobCopy("fullmap")
	inc.Crush = d.BlobCopy("crush")
	inc.NewMaxOSD = d.I32("new_max_osd")
	inc.NewPools = denc.Map(d, "new_pools", 9, func(d *denc.Decoder) (int64, *Pool) {
		return d.I64("pool id"), decodePool(d)
	})
	inc.NewPoolNames = denc.Map(d, "new_pool_names", 12, func(d *denc.Decoder) (int64, string) {
		return d.I64("pool id"), d.String("pool name")
	})
	inc.OldPools = denc.List(d, "old_pools", 8, func(d *denc.Decoder) int64 { return d.I64("pool id") })
	inc.NewUpClient = decodeOSDAddrVecs(d, "new_up_client")
	if v >= 5 {
		inc.NewState = decodeOSDU32(d, "new_state")
	} else {
		inc.NewState = denc.Map(d, "new_state", 5, func(d *denc.Decoder) (int32, uint32) {
			return d.I32("osd"), uint32(d.U8("state"))
		})
	}
	inc.NewWeight = decodeOSDU32(d, "new_weight")
	inc.NewPGTemp = decodePGOSDs(d, "new_pg_temp")
	inc.NewPrimaryTemp = decodePGInt(d, "new_primary_temp")
	if v >= 2 {
		inc.NewPrimaryAffinity = decodeOSDU32(d, "new_primary_affinity")
	}
	if v >= 3 {
		inc.NewErasureCodeProfiles = decodeProfiles(d, "new_erasure_code_profiles")
		inc.OldErasureCodeProfiles = denc.List(d, "old_erasure_code_profiles", 4,
			func(d *denc.Decoder) string { return d.String("profile") })
	}
	if v >= 4 {
		inc.NewPGUpmap = decodePGOSDs(d, "new_pg_upmap")
		inc.OldPGUpmap = decodePGSet(d, "old_pg_upmap")
		inc.NewPGUpmapItems = decodePGUpmapItems(d, "new_pg_upmap_items")
		inc.OldPGUpmapItems = decodePGSet(d, "old_pg_upmap_items")
	}
	if v >= 6 {
		inc.NewRemovedSnaps = decodeIntervalsMap(d, "new_removed_snaps")
		inc.NewPurgedSnaps = decodeIntervalsMap(d, "new_purged_snaps")
	}
	if v >= 8 {
		inc.NewLastUpChange.Decode(d)
		inc.NewLastInChange.Decode(d)
	}
	if v >= 9 {
		inc.NewPGUpmapPrimary = decodePGInt(d, "new_pg_upmap_primary")
		inc.OldPGUpmapPrimary = decodePGSet(d, "old_pg_upmap_primary")
	}
	endOfKnown(d, "incremental client data", v, incClientVersion)
}

func (inc *Incremental) decodeOSD(d *denc.Decoder, v uint8) {
	inc.NewHBBackUp = decodeOSDAddrVecs(d, "new_hb_back_up")
	inc.NewUpThru = decodeOSDU32(d, "new_up_thru")
	inc.NewLastCleanInterval = denc.Map(d, "new_last_clean_interval", 12, func(d *denc.Decoder) (int32, [2]uint32) {
		return d.I32("osd"), [2]uint32{d.U32("first"), d.U32("last")}
	})
	inc.NewLost = decodeOSDU32(d, "new_lost")
	inc.NewBlocklist = decodeAddrTimes(d, "new_blocklist")
	inc.OldBlocklist = denc.List(d, "old_blocklist", denc.MinEntityAddrLen, denc.Get[denc.EntityAddr])
	inc.NewUpCluster = decodeOSDAddrVecs(d, "new_up_cluster")
	inc.ClusterSnapshot = d.String("cluster_snapshot")
	inc.NewUUID = denc.Map(d, "new_uuid", 20, func(d *denc.Decoder) (int32, denc.UUID) {
		o := d.I32("osd")
		var u denc.UUID
		u.Decode(d)
		return o, u
	})
	inc.NewXInfo = denc.Map(d, "new_xinfo", 4+osdXInfoMinLen, func(d *denc.Decoder) (int32, OSDXInfo) {
		o := d.I32("osd")
		var x OSDXInfo
		x.Decode(d)
		return o, x
	})
	inc.NewHBFrontUp = decodeOSDAddrVecs(d, "new_hb_front_up")
	if v >= 2 {
		inc.EncodeFeatures = d.U64("encode_features")
	}
	if v >= 3 {
		inc.NewNearfullRatio = f32(d, "new_nearfull_ratio")
		inc.NewFullRatio = f32(d, "new_full_ratio")
	}
	if v >= 4 {
		inc.NewBackfillfullRatio = f32(d, "new_backfillfull_ratio")
	}
	if v == 5 {
		d.String("new_require_min_compat_client (name)")
	}
	if v >= 6 {
		inc.NewRequireMinCompatClient = d.U8("new_require_min_compat_client")
		inc.NewRequireOSDRelease = d.U8("new_require_osd_release")
	} else if inc.NewFlags >= 0 {
		f := uint32(inc.NewFlags)
		switch {
		case f&flagRequireLuminous != 0:
			inc.NewRequireOSDRelease = releaseLuminous
			inc.NewFlags = int32(f &^ legacyRequireFlags)
		case f&flagRequireKraken != 0:
			inc.NewRequireOSDRelease = releaseLuminous - 1
		case f&flagRequireJewel != 0:
			inc.NewRequireOSDRelease = releaseLuminous - 2
		default:
			inc.NewRequireOSDRelease = 0
		}
	} else {
		inc.NewRequireOSDRelease = 0
	}
	if v >= 8 {
		inc.NewCrushNodeFlags = decodeFlagMap(d, "new_crush_node_flags")
	}
	if v >= 9 {
		inc.NewDeviceClassFlags = decodeFlagMap(d, "new_device_class_flags")
	}
	if v >= 10 {
		inc.ChangeStretchMode = d.Bool("change_stretch_mode")
		inc.NewStretchBucketCount = d.U32("new_stretch_bucket_count")
		inc.NewDegradedStretchMode = d.U32("new_degraded_stretch_mode")
		inc.NewRecoveringStretchMode = d.U32("new_recovering_stretch_mode")
		inc.NewStretchModeBucket = d.I32("new_stretch_mode_bucket")
		inc.StretchModeEnabled = d.Bool("stretch_mode_enabled")
	}
	if v >= 11 {
		inc.NewRangeBlocklist = decodeAddrTimes(d, "new_range_blocklist")
		inc.OldRangeBlocklist = denc.List(d, "old_range_blocklist", denc.MinEntityAddrLen, denc.Get[denc.EntityAddr])
	}
	if v >= 12 {
		inc.MutateAllowCrimson = d.U8("mutate_allow_crimson")
	}
	endOfKnown(d, "incremental osd data", v, incOSDVersion)
}

func decodeOSDU32(d *denc.Decoder, what string) map[int32]uint32 {
	return denc.Map(d, what, 8, func(d *denc.Decoder) (int32, uint32) {
		return d.I32(what + " osd"), d.U32(what + " value")
	})
}

func decodeOSDAddrVecs(d *denc.Decoder, what string) map[int32]denc.EntityAddrVec {
	return denc.Map(d, what, 4+denc.MinEntityAddrVecLen, func(d *denc.Decoder) (int32, denc.EntityAddrVec) {
		o := d.I32(what + " osd")
		var v denc.EntityAddrVec
		v.Decode(d)
		return o, v
	})
}
