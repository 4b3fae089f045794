// Package osdmap decodes Ceph OSDMaps, full and incremental, applies
// incrementals, and maps objects to placement groups and placement groups
// to OSDs exactly as Ceph's OSDMap::_pg_to_up_acting_osds does: CRUSH,
// then removal of nonexistent OSDs, pg_upmap, pg_upmap_items,
// pg_upmap_primaries, down OSDs, primary affinity, pg_temp and
// primary_temp.
//
// An OSDMap is not modified after decoding except by ApplyIncremental,
// which returns a new map; readers may share one map freely.
package osdmap

import (
	"github.com/purerbd/purerbd/rados/crush"
	"github.com/purerbd/purerbd/rados/denc"
)

// OSD state bits (CEPH_OSD_*).
const (
	StateExists       = 1 << 0
	StateUp           = 1 << 1
	StateAutoOut      = 1 << 2
	StateNew          = 1 << 3
	StateFull         = 1 << 4
	StateNearFull     = 1 << 5
	StateBackfillFull = 1 << 6
	StateDestroyed    = 1 << 7
	StateNoUp         = 1 << 8
	StateNoDown       = 1 << 9
	StateNoIn         = 1 << 10
	StateNoOut        = 1 << 11
	StateStop         = 1 << 12
)

// Weights and affinities are 16.16 fixed point.
const (
	WeightIn                     = 0x10000
	WeightOut                    = 0
	DefaultPrimaryAffinity       = 0x10000
	MaxPrimaryAffinity           = 0x10000
	crushItemNone                = crush.ItemNone
	releaseLuminous        uint8 = 12
	releaseNautilus        uint8 = 14
)

// Map flags needing special handling (CEPH_OSDMAP_*).
const (
	flagRequireJewel    = 1 << 16
	flagRequireKraken   = 1 << 17
	flagRequireLuminous = 1 << 18
	flagRecoveryDeletes = 1 << 19
	flagPGLogHardLimit  = 1 << 22
	legacyRequireFlags  = flagRequireJewel | flagRequireKraken | flagRequireLuminous
)

// UpmapItem is one pg_upmap_items remapping: replace From with To.
type UpmapItem struct {
	From, To int32
}

// OSDMap is a decoded OSDMap.
type OSDMap struct {
	// Client-usable part.
	FSID                denc.UUID
	Epoch               uint32
	Created, Modified   denc.UTime
	Pools               map[int64]*Pool
	PoolNames           map[int64]string
	PoolMax             int32
	Flags               uint32
	MaxOSD              int32
	OSDState            []uint32
	OSDWeight           []uint32
	ClientAddrs         []denc.EntityAddrVec
	PGTemp              map[denc.PG][]int32
	PrimaryTemp         map[denc.PG]int32
	PrimaryAffinity     []uint32 // nil when every OSD has the default
	Crush               *crush.Map
	ErasureCodeProfiles map[string]map[string]string
	PGUpmap             map[denc.PG][]int32
	PGUpmapItems        map[denc.PG][]UpmapItem
	PGUpmapPrimaries    map[denc.PG]int32
	CrushVersion        int32
	NewRemovedSnaps     map[int64]Intervals
	NewPurgedSnaps      map[int64]Intervals
	LastUpChange        denc.UTime
	LastInChange        denc.UTime

	// OSD-only part.
	HBBackAddrs            []denc.EntityAddrVec
	ClusterAddrs           []denc.EntityAddrVec
	HBFrontAddrs           []denc.EntityAddrVec
	OSDInfo                []OSDInfo
	Blocklist              map[denc.EntityAddr]denc.UTime
	ClusterSnapshotEpoch   uint32
	ClusterSnapshot        string
	OSDUUID                []denc.UUID
	OSDXInfo               []OSDXInfo
	NearfullRatio          float32
	FullRatio              float32
	BackfillfullRatio      float32
	RequireMinCompatClient uint8
	RequireOSDRelease      uint8
	RemovedSnapsQueue      map[int64]Intervals
	CrushNodeFlags         map[int32]uint32
	DeviceClassFlags       map[int32]uint32
	StretchModeEnabled     bool
	StretchBucketCount     uint32
	DegradedStretchMode    uint32
	RecoveringStretchMode  uint32
	StretchModeBucket      int32
	RangeBlocklist         map[denc.EntityAddr]denc.UTime
	AllowCrimson           bool

	// CRC is the map's crc32c as encoded (maps since Luminous carry one).
	CRC        uint32
	CRCDefined bool

	// Versions of the decoded encoding's parts.
	ClientVersion, OSDVersion uint8
}

// Exists reports whether osd is a current member of the cluster.
func (m *OSDMap) Exists(osd int32) bool {
	return osd >= 0 && osd < m.MaxOSD && int(osd) < len(m.OSDState) && m.OSDState[osd]&StateExists != 0
}

// IsUp reports whether osd exists and is up.
func (m *OSDMap) IsUp(osd int32) bool { return m.Exists(osd) && m.OSDState[osd]&StateUp != 0 }

// IsDown reports whether osd is not up (including not existing).
func (m *OSDMap) IsDown(osd int32) bool { return !m.IsUp(osd) }

// IsOut reports whether osd does not exist or has weight 0.
func (m *OSDMap) IsOut(osd int32) bool { return !m.Exists(osd) || m.Weight(osd) == WeightOut }

// IsIn is !IsOut.
func (m *OSDMap) IsIn(osd int32) bool { return !m.IsOut(osd) }

// Weight returns the OSD's in/out reweight (0x10000 = in).
func (m *OSDMap) Weight(osd int32) uint32 {
	if osd < 0 || int(osd) >= len(m.OSDWeight) {
		return 0
	}
	return m.OSDWeight[osd]
}

// Affinity returns the OSD's primary affinity (0x10000 = default).
func (m *OSDMap) Affinity(osd int32) uint32 {
	if m.PrimaryAffinity == nil || osd < 0 || int(osd) >= len(m.PrimaryAffinity) {
		return DefaultPrimaryAffinity
	}
	return m.PrimaryAffinity[osd]
}

// Addrs returns the OSD's client-facing addresses.
func (m *OSDMap) Addrs(osd int32) denc.EntityAddrVec {
	if osd < 0 || int(osd) >= len(m.ClientAddrs) {
		return nil
	}
	return m.ClientAddrs[osd]
}

// Pool returns the pool with the given id, or nil.
func (m *OSDMap) Pool(id int64) *Pool { return m.Pools[id] }

// PoolByName returns the id of the named pool.
func (m *OSDMap) PoolByName(name string) (int64, bool) {
	for id, n := range m.PoolNames {
		if n == name {
			return id, true
		}
	}
	return 0, false
}
