package osdmap

import (
	"errors"
	"fmt"
	"math"

	"github.com/purerbd/purerbd/rados/crc32c"
	"github.com/purerbd/purerbd/rados/crush"
	"github.com/purerbd/purerbd/rados/denc"
)

// Newest part versions this package understands (Tentacle).
const (
	mapWrapperVersion = 8
	mapClientVersion  = 10
	mapOSDVersion     = 12
)

// ErrClassicEncoding is returned for pre-Firefly ("classic") encodings,
// which no supported Ceph release sends.
var ErrClassicEncoding = errors.New("osdmap: classic (pre-v7) encoding not supported")

// ErrBadCRC is returned when a map's or incremental's crc32c does not
// match its bytes.
var ErrBadCRC = errors.New("osdmap: crc mismatch")

// envelope is a struct header read by hand where the caller needs the
// absolute offsets the crc covers.
type envelope struct {
	version uint8
	body    []byte // the struct's bytes after the header
	hdrLen  int
}

// readWrapper reads the outer OSDMap/Incremental envelope: version,
// compat, length (DECODE_START_LEGACY_COMPAT_LEN with 7 as the first
// versioned encoding).
func readWrapper(b []byte, what string, maxCompat uint8) (envelope, error) {
	d := denc.NewDecoder(b)
	v := d.U8(what + " version")
	if d.Err() == nil && v < 7 {
		return envelope{}, ErrClassicEncoding
	}
	c := d.U8(what + " compat")
	n := d.U32(what + " length")
	if err := d.Err(); err != nil {
		return envelope{}, fmt.Errorf("osdmap: %s: %w", what, err)
	}
	if c > maxCompat {
		return envelope{}, fmt.Errorf("osdmap: %s: %w: compat %d (version %d), understood up to %d",
			what, denc.ErrTooNew, c, v, maxCompat)
	}
	if uint64(n) > uint64(d.Remaining()) {
		return envelope{}, fmt.Errorf("osdmap: %s: %w: length %d exceeds remaining %d bytes",
			what, denc.ErrShort, n, d.Remaining())
	}
	return envelope{version: v, body: b[6 : 6+int(n)], hdrLen: 6}, nil
}

// maxOSDLimit bounds max_osd: far above any real cluster, low enough
// that a corrupt map cannot make Apply allocate without bound.
const maxOSDLimit = 1 << 20

// Decode decodes a full OSDMap (as carried by MOSDMap or written by
// `ceph osd getmap` and osdmaptool) and verifies its crc.
func Decode(b []byte) (*OSDMap, error) { return decodeOSDMap(b, true) }

func decodeOSDMap(b []byte, verifyCRC bool) (*OSDMap, error) {
	env, err := readWrapper(b, "osdmap", mapWrapperVersion)
	if err != nil {
		return nil, err
	}
	m := &OSDMap{}
	d := denc.NewDecoder(env.body)
	m.ClientVersion = d.Versioned("osdmap client data", mapClientVersion, m.decodeClient)
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("osdmap: decode: %w", err)
	}
	m.OSDVersion = d.Versioned("osdmap osd data", mapOSDVersion, m.decodeOSD)
	if env.version >= 8 {
		crcAt := d.Offset()
		m.CRC = d.U32("osdmap crc")
		tail := d.Rest()
		if err := d.Err(); err != nil {
			return nil, fmt.Errorf("osdmap: decode: %w", err)
		}
		m.CRCDefined = true
		actual := crc32c.Checksum(b[:env.hdrLen+crcAt])
		actual = crc32c.Update(actual, tail)
		if verifyCRC && actual != m.CRC {
			return nil, fmt.Errorf("%w: map says %#x, bytes give %#x", ErrBadCRC, m.CRC, actual)
		}
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("osdmap: decode: %w", err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *OSDMap) decodeClient(d *denc.Decoder, v uint8) {
	m.FSID.Decode(d)
	m.Epoch = d.U32("epoch")
	m.Created.Decode(d)
	m.Modified.Decode(d)
	m.Pools = denc.Map(d, "pools", 9, func(d *denc.Decoder) (int64, *Pool) {
		return d.I64("pool id"), decodePool(d)
	})
	m.PoolNames = denc.Map(d, "pool_name", 12, func(d *denc.Decoder) (int64, string) {
		return d.I64("pool id"), d.String("pool name")
	})
	m.PoolMax = d.I32("pool_max")
	m.Flags = d.U32("flags")
	m.MaxOSD = d.I32("max_osd")
	if v >= 5 {
		m.OSDState = denc.List(d, "osd_state", 4, func(d *denc.Decoder) uint32 { return d.U32("osd state") })
	} else {
		m.OSDState = denc.List(d, "osd_state", 1, func(d *denc.Decoder) uint32 { return uint32(d.U8("osd state")) })
	}
	m.OSDWeight = decodeU32List(d, "osd_weight")
	m.ClientAddrs = decodeAddrVecs(d, "client_addrs")
	m.PGTemp = decodePGOSDs(d, "pg_temp")
	m.PrimaryTemp = decodePGInt(d, "primary_temp")
	if v >= 2 {
		m.PrimaryAffinity = decodeU32List(d, "osd_primary_affinity")
		if len(m.PrimaryAffinity) == 0 {
			m.PrimaryAffinity = nil
		}
	}
	crushBytes := d.Blob("crush")
	if d.Err() != nil {
		return
	}
	cm, err := crush.Decode(crushBytes)
	if err != nil {
		d.Fail("crush", err)
		return
	}
	m.Crush = cm
	if v >= 3 {
		m.ErasureCodeProfiles = decodeProfiles(d, "erasure_code_profiles")
	}
	if v >= 4 {
		m.PGUpmap = decodePGOSDs(d, "pg_upmap")
		m.PGUpmapItems = decodePGUpmapItems(d, "pg_upmap_items")
	}
	if v >= 6 {
		m.CrushVersion = d.I32("crush_version")
	}
	if v >= 7 {
		m.NewRemovedSnaps = decodeIntervalsMap(d, "new_removed_snaps")
		m.NewPurgedSnaps = decodeIntervalsMap(d, "new_purged_snaps")
	}
	if v >= 9 {
		m.LastUpChange.Decode(d)
		m.LastInChange.Decode(d)
	}
	if v >= 10 {
		m.PGUpmapPrimaries = decodePGInt(d, "pg_upmap_primaries")
	}
	endOfKnown(d, "osdmap client data", v, mapClientVersion)
}

func (m *OSDMap) decodeOSD(d *denc.Decoder, v uint8) {
	m.HBBackAddrs = decodeAddrVecs(d, "hb_back_addrs")
	m.OSDInfo = denc.List(d, "osd_info", osdInfoLen, denc.Get[OSDInfo])
	m.Blocklist = decodeAddrTimes(d, "blocklist")
	m.ClusterAddrs = decodeAddrVecs(d, "cluster_addrs")
	m.ClusterSnapshotEpoch = d.U32("cluster_snapshot_epoch")
	m.ClusterSnapshot = d.String("cluster_snapshot")
	m.OSDUUID = denc.List(d, "osd_uuid", 16, denc.Get[denc.UUID])
	m.OSDXInfo = denc.List(d, "osd_xinfo", osdXInfoMinLen, denc.Get[OSDXInfo])
	m.HBFrontAddrs = decodeAddrVecs(d, "hb_front_addrs")
	if v >= 2 {
		m.NearfullRatio = f32(d, "nearfull_ratio")
		m.FullRatio = f32(d, "full_ratio")
	}
	if v >= 3 {
		m.BackfillfullRatio = f32(d, "backfillfull_ratio")
	}
	if v == 4 {
		d.String("require_min_compat_client (name)")
	}
	if v >= 5 {
		m.RequireMinCompatClient = d.U8("require_min_compat_client")
		m.RequireOSDRelease = d.U8("require_osd_release")
		if releaseAtLeast(m.RequireOSDRelease, releaseNautilus) {
			m.Flags |= flagPGLogHardLimit
		}
		if releaseAtLeast(m.RequireOSDRelease, releaseLuminous) {
			m.Flags &^= legacyRequireFlags
			m.Flags |= flagRecoveryDeletes
		}
	} else {
		switch {
		case m.Flags&flagRequireLuminous != 0:
			m.RequireOSDRelease = releaseLuminous
			m.Flags &^= legacyRequireFlags
			m.Flags |= flagRecoveryDeletes
		case m.Flags&flagRequireKraken != 0:
			m.RequireOSDRelease = releaseLuminous - 1
		case m.Flags&flagRequireJewel != 0:
			m.RequireOSDRelease = releaseLuminous - 2
		}
	}
	if v >= 6 {
		m.RemovedSnapsQueue = decodeIntervalsMap(d, "removed_snaps_queue")
	}
	if v >= 8 {
		m.CrushNodeFlags = decodeFlagMap(d, "crush_node_flags")
	}
	if v >= 9 {
		m.DeviceClassFlags = decodeFlagMap(d, "device_class_flags")
	}
	if v >= 10 {
		m.StretchModeEnabled = d.Bool("stretch_mode_enabled")
		m.StretchBucketCount = d.U32("stretch_bucket_count")
		m.DegradedStretchMode = d.U32("degraded_stretch_mode")
		m.RecoveringStretchMode = d.U32("recovering_stretch_mode")
		m.StretchModeBucket = d.I32("stretch_mode_bucket")
	}
	if v >= 11 {
		m.RangeBlocklist = decodeAddrTimes(d, "range_blocklist")
	}
	if v >= 12 {
		m.AllowCrimson = d.Bool("allow_crimson")
	}
	endOfKnown(d, "osdmap osd data", v, mapOSDVersion)
}

// check enforces what the mapper relies on: per-OSD vectors as long as
// max_osd.
func (m *OSDMap) check() error {
	n := int(m.MaxOSD)
	if m.MaxOSD < 0 || m.MaxOSD > maxOSDLimit {
		return fmt.Errorf("osdmap: %w: max_osd %d", denc.ErrInvalid, m.MaxOSD)
	}
	if len(m.OSDState) != n || len(m.OSDWeight) != n {
		return fmt.Errorf("osdmap: %w: max_osd %d but %d states and %d weights",
			denc.ErrInvalid, n, len(m.OSDState), len(m.OSDWeight))
	}
	if m.PrimaryAffinity != nil && len(m.PrimaryAffinity) != n {
		return fmt.Errorf("osdmap: %w: max_osd %d but %d primary affinities",
			denc.ErrInvalid, n, len(m.PrimaryAffinity))
	}
	return nil
}

// releaseAtLeast compares ceph_release_t values the way Ceph does: a
// value with the top bit set (the old -1, "unset") is below everything.
func releaseAtLeast(a, b uint8) bool { return !releaseLess(a, b) }

func releaseLess(a, b uint8) bool {
	switch {
	case int8(a) < 0:
		return true
	case int8(b) < 0:
		return false
	}
	return a < b
}

func f32(d *denc.Decoder, what string) float32 { return math.Float32frombits(d.U32(what)) }

func decodeU32List(d *denc.Decoder, what string) []uint32 {
	return denc.List(d, what, 4, func(d *denc.Decoder) uint32 { return d.U32(what) })
}

func decodeAddrVecs(d *denc.Decoder, what string) []denc.EntityAddrVec {
	return denc.List(d, what, denc.MinEntityAddrVecLen, denc.Get[denc.EntityAddrVec])
}

const pgLen = 17 // encoded pg_t

func decodePGOSDs(d *denc.Decoder, what string) map[denc.PG][]int32 {
	return denc.Map(d, what, pgLen+4, func(d *denc.Decoder) (denc.PG, []int32) {
		var pg denc.PG
		pg.Decode(d)
		return pg, denc.List(d, what+" osds", 4, func(d *denc.Decoder) int32 { return d.I32(what + " osd") })
	})
}

func decodePGInt(d *denc.Decoder, what string) map[denc.PG]int32 {
	return denc.Map(d, what, pgLen+4, func(d *denc.Decoder) (denc.PG, int32) {
		var pg denc.PG
		pg.Decode(d)
		return pg, d.I32(what + " osd")
	})
}

func decodePGUpmapItems(d *denc.Decoder, what string) map[denc.PG][]UpmapItem {
	return denc.Map(d, what, pgLen+4, func(d *denc.Decoder) (denc.PG, []UpmapItem) {
		var pg denc.PG
		pg.Decode(d)
		return pg, denc.List(d, what+" items", 8, func(d *denc.Decoder) UpmapItem {
			return UpmapItem{From: d.I32(what + " from"), To: d.I32(what + " to")}
		})
	})
}

func decodePGSet(d *denc.Decoder, what string) []denc.PG {
	return denc.List(d, what, pgLen, denc.Get[denc.PG])
}

func decodeProfiles(d *denc.Decoder, what string) map[string]map[string]string {
	return denc.Map(d, what, 8, func(d *denc.Decoder) (string, map[string]string) {
		return d.String(what + " name"), decodeStringMap(d, what)
	})
}

func decodeAddrTimes(d *denc.Decoder, what string) map[denc.EntityAddr]denc.UTime {
	return denc.Map(d, what, denc.MinEntityAddrLen+8, func(d *denc.Decoder) (denc.EntityAddr, denc.UTime) {
		var a denc.EntityAddr
		a.Decode(d)
		var t denc.UTime
		t.Decode(d)
		return a, t
	})
}

func decodeFlagMap(d *denc.Decoder, what string) map[int32]uint32 {
	return denc.Map(d, what, 8, func(d *denc.Decoder) (int32, uint32) {
		return d.I32(what + " id"), d.U32(what + " flags")
	})
}

// endOfKnown fails when a struct of a version this package fully knows
// has bytes left over: they can only mean the decoder misread it. Bytes
// after a newer version's known fields are skipped, as Ceph skips them.
func endOfKnown(d *denc.Decoder, what string, v, known uint8) {
	if v <= known && d.Remaining() > 0 {
		d.Failf(what, "%d bytes left over in a version %d struct", d.Remaining(), v)
	}
}
