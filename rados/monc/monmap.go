// Package monc is the monitor client: hunting, MonMap, subscriptions, mon
// commands.
package monc

import (
	"fmt"
	"sort"
	"strings"

	"github.com/purerbd/purerbd/rados/denc"
)

// Monitor feature bits (ceph::features::mon), as carried in a MonMap's
// persistent and optional features.
const (
	MonFeatureKraken      uint64 = 1 << 0
	MonFeatureLuminous    uint64 = 1 << 1
	MonFeatureMimic       uint64 = 1 << 2
	MonFeatureOSDMapPrune uint64 = 1 << 3
	MonFeatureNautilus    uint64 = 1 << 4
	MonFeatureOctopus     uint64 = 1 << 5
	MonFeaturePacific     uint64 = 1 << 6
	MonFeaturePinging     uint64 = 1 << 7
	MonFeatureQuincy      uint64 = 1 << 8
	MonFeatureReef        uint64 = 1 << 9
	MonFeatureSquid       uint64 = 1 << 10
	MonFeatureTentacle    uint64 = 1 << 11
)

// Ceph release numbers (ceph_release_t) that MonMap.MinMonRelease holds.
const (
	ReleaseUnknown  uint8 = 0
	ReleaseKraken   uint8 = 11
	ReleaseLuminous uint8 = 12
	ReleaseMimic    uint8 = 13
	ReleaseNautilus uint8 = 14
	ReleaseOctopus  uint8 = 15
	ReleasePacific  uint8 = 16
	ReleaseQuincy   uint8 = 17
	ReleaseReef     uint8 = 18
	ReleaseSquid    uint8 = 19
	ReleaseTentacle uint8 = 20
)

// ReleaseName returns the code name of a Ceph release number ("pacific"),
// or "unknown".
func ReleaseName(r uint8) string {
	names := map[uint8]string{
		ReleaseKraken: "kraken", ReleaseLuminous: "luminous", ReleaseMimic: "mimic",
		ReleaseNautilus: "nautilus", ReleaseOctopus: "octopus", ReleasePacific: "pacific",
		ReleaseQuincy: "quincy", ReleaseReef: "reef", ReleaseSquid: "squid", ReleaseTentacle: "tentacle",
	}
	if n, ok := names[r]; ok {
		return n
	}
	return "unknown"
}

// ElectionStrategy is how monitors elect a leader.
type ElectionStrategy uint8

// Election strategies.
const (
	ElectionClassic      ElectionStrategy = 1 // lowest rank wins
	ElectionDisallow     ElectionStrategy = 2 // classic, minus the disallowed leaders
	ElectionConnectivity ElectionStrategy = 3 // prefer the best-connected monitor
)

// MonInfo is Ceph's mon_info_t: one monitor in the MonMap.
type MonInfo struct {
	Name string
	// Addrs are the monitor's public addresses (usually v2 and v1).
	Addrs denc.EntityAddrVec
	// Priority: lower is preferred by clients choosing a monitor.
	Priority uint16
	// Weight biases the choice among monitors of equal priority.
	Weight uint16
	// CrushLocation is the monitor's place in the CRUSH hierarchy (stretch
	// mode), e.g. {"datacenter": "a"}.
	CrushLocation map[string]string
	// TimeAdded is when the monitor joined the map (version 6, Ceph 20+);
	// zero when unknown.
	TimeAdded denc.UTime
}

// Decode reads a mon_info_t, versions 1 to 6.
func (mi *MonInfo) Decode(d *denc.Decoder) {
	*mi = MonInfo{}
	d.Versioned("mon_info_t", 6, func(d *denc.Decoder, v uint8) {
		mi.Name = d.String("mon_info_t name")
		mi.Addrs.Decode(d)
		if v >= 2 {
			mi.Priority = d.U16("mon_info_t priority")
		}
		if v >= 4 {
			mi.Weight = d.U16("mon_info_t weight")
		}
		if v >= 5 {
			mi.CrushLocation = decodeStringMap(d, "mon_info_t crush_location")
		}
		if v >= 6 {
			mi.TimeAdded.Decode(d)
		}
	})
}

// Encode writes a mon_info_t: version 5, or 6 when TimeAdded is set.
func (mi MonInfo) Encode(e *denc.Encoder) {
	v := uint8(5)
	if !mi.TimeAdded.IsZero() {
		v = 6
	}
	e.Versioned(v, 1, func(e *denc.Encoder) {
		e.String(mi.Name)
		mi.Addrs.Encode(e)
		e.U16(mi.Priority)
		e.U16(mi.Weight)
		encodeStringMap(e, mi.CrushLocation)
		if v >= 6 {
			mi.TimeAdded.Encode(e)
		}
	})
}

// String returns "mon.NAME addrs ADDRS priority P weight W".
func (mi MonInfo) String() string {
	return fmt.Sprintf("mon.%s addrs %s priority %d weight %d", mi.Name, mi.Addrs, mi.Priority, mi.Weight)
}

// MonMap is the monitors' map of themselves: who they are, where they
// listen, and cluster-wide monitor settings. Clients fetch it first and
// keep it current to know which monitors to hunt through.
type MonMap struct {
	FSID        denc.UUID
	Epoch       uint32
	LastChanged denc.UTime
	Created     denc.UTime
	// PersistentFeatures can never be unset once set; OptionalFeatures
	// may come and go. Both hold MonFeature* bits.
	PersistentFeatures uint64
	OptionalFeatures   uint64
	// Mons holds every monitor by name.
	Mons map[string]MonInfo
	// Ranks lists monitor names in rank order (rank = index).
	Ranks []string
	// MinMonRelease is the oldest release a monitor may run (Release*).
	MinMonRelease uint8
	// RemovedRanks are ranks removed when this map took effect.
	RemovedRanks      []uint32
	ElectionStrategy  ElectionStrategy
	DisallowedLeaders []string
	// StretchMode is set when the cluster runs in stretch mode with
	// TiebreakerMon as the tie-breaking monitor.
	StretchMode           bool
	TiebreakerMon         string
	StretchMarkedDownMons []string
	// GlobalStretchMode (version 10) equals StretchMode in older maps.
	GlobalStretchMode bool
}

// DecodeMonMap decodes an encoded MonMap, as `ceph mon getmap` writes it
// and MMonMap carries it. All bytes must belong to the map.
func DecodeMonMap(b []byte) (*MonMap, error) {
	m := new(MonMap)
	d := denc.NewDecoder(b)
	m.Decode(d)
	d.End("MonMap trailing bytes")
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("decoding monmap: %w", err)
	}
	return m, nil
}

// Decode reads a MonMap of any version Ceph still reads (1 to 10).
func (m *MonMap) Decode(d *denc.Decoder) {
	*m = MonMap{ElectionStrategy: ElectionClassic}
	// Versions 1 and 2 were a bare u16 version: no compat byte, no length.
	d.VersionedLegacy("MonMap", 10, 3, 3, 1, func(d *denc.Decoder, v uint8) {
		m.FSID.Decode(d)
		m.Epoch = d.U32("MonMap epoch")
		var legacy map[string]denc.EntityAddr
		switch {
		case v == 1:
			insts := denc.List(d, "MonMap mon_inst", 9+7+12, denc.Get[denc.EntityInst])
			legacy = make(map[string]denc.EntityAddr, len(insts))
			for i, in := range insts {
				// Ceph names version-1 monitors by one character, '0'+i.
				legacy[string([]byte{byte('0' + i)})] = in.Addr
			}
		case v < 6:
			legacy = denc.Map(d, "MonMap mon_addr", 4+7+12, func(d *denc.Decoder) (string, denc.EntityAddr) {
				return d.String("MonMap mon name"), denc.Get[denc.EntityAddr](d)
			})
		}
		m.LastChanged.Decode(d)
		m.Created.Decode(d)
		if v >= 4 {
			m.PersistentFeatures = decodeMonFeatures(d, "MonMap persistent_features")
			m.OptionalFeatures = decodeMonFeatures(d, "MonMap optional_features")
		}
		if v < 5 {
			m.Mons = make(map[string]MonInfo, len(legacy))
			for name, a := range legacy {
				m.Mons[name] = MonInfo{Name: name, Addrs: denc.EntityAddrVec{a}}
			}
		} else {
			// a name, then a mon_info_t: envelope, name, address vector
			m.Mons = denc.Map(d, "MonMap mon_info", 4+6+4+denc.MinEntityAddrVecLen, func(d *denc.Decoder) (string, MonInfo) {
				return d.String("MonMap mon name"), denc.Get[MonInfo](d)
			})
		}
		if v < 6 {
			m.Ranks = legacyRanks(m.Mons)
		} else {
			m.Ranks = decodeStrings(d, "MonMap ranks")
		}
		if v >= 7 {
			m.MinMonRelease = d.U8("MonMap min_mon_release")
		} else {
			m.MinMonRelease = inferRelease(m.PersistentFeatures)
		}
		if v >= 8 {
			m.RemovedRanks = denc.List(d, "MonMap removed_ranks", 4, func(d *denc.Decoder) uint32 {
				return d.U32("MonMap removed rank")
			})
			m.ElectionStrategy = ElectionStrategy(d.U8("MonMap strategy"))
			m.DisallowedLeaders = decodeStrings(d, "MonMap disallowed_leaders")
		}
		if v >= 9 {
			m.StretchMode = d.Bool("MonMap stretch_mode_enabled")
			m.TiebreakerMon = d.String("MonMap tiebreaker_mon")
			m.StretchMarkedDownMons = decodeStrings(d, "MonMap stretch_marked_down_mons")
		}
		if v >= 10 {
			m.GlobalStretchMode = d.Bool("MonMap global_stretch_mode_enabled")
		} else {
			m.GlobalStretchMode = m.StretchMode
		}
		if d.Err() != nil {
			return
		}
		if m.Mons == nil {
			m.Mons = map[string]MonInfo{}
		}
		for i, name := range m.Ranks {
			if _, ok := m.Mons[name]; !ok {
				d.Failf("MonMap ranks", "rank %d names unknown monitor %q", i, name)
				return
			}
		}
	})
}

// Encode writes the MonMap as a Nautilus-or-newer monitor does: version 9
// (compat 6), or 10 when GlobalStretchMode differs from StretchMode.
func (m *MonMap) Encode(e *denc.Encoder) {
	v := uint8(9)
	if m.GlobalStretchMode != m.StretchMode {
		v = 10
	}
	e.Versioned(v, 6, func(e *denc.Encoder) {
		m.FSID.Encode(e)
		e.U32(m.Epoch)
		m.LastChanged.Encode(e)
		m.Created.Encode(e)
		encodeMonFeatures(e, m.PersistentFeatures)
		encodeMonFeatures(e, m.OptionalFeatures)
		names := sortedKeys(m.Mons)
		denc.PutMap(e, m.Mons, names, func(e *denc.Encoder, k string, mi MonInfo) {
			e.String(k)
			mi.Encode(e)
		})
		encodeStrings(e, m.Ranks)
		e.U8(m.MinMonRelease)
		removed := append([]uint32(nil), m.RemovedRanks...)
		sort.Slice(removed, func(i, j int) bool { return removed[i] < removed[j] })
		denc.PutList(e, removed, func(e *denc.Encoder, r uint32) { e.U32(r) })
		e.U8(uint8(m.ElectionStrategy))
		encodeStringSet(e, m.DisallowedLeaders)
		e.Bool(m.StretchMode)
		e.String(m.TiebreakerMon)
		encodeStringSet(e, m.StretchMarkedDownMons)
		if v >= 10 {
			e.Bool(m.GlobalStretchMode)
		}
	})
}

// Rank returns the rank of the named monitor, or -1.
func (m *MonMap) Rank(name string) int {
	for i, n := range m.Ranks {
		if n == name {
			return i
		}
	}
	return -1
}

// ByRank returns the monitors in rank order.
func (m *MonMap) ByRank() []MonInfo {
	out := make([]MonInfo, 0, len(m.Ranks))
	for _, n := range m.Ranks {
		out = append(out, m.Mons[n])
	}
	return out
}

// String summarises m as Ceph's print_summary does:
// "e3: 1 mons at {a=[v2:127.0.0.1:3300/0,v1:127.0.0.1:6789/0]}".
func (m *MonMap) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "e%d: %d mons at {", m.Epoch, len(m.Mons))
	for i, n := range sortedKeys(m.Mons) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n + "=" + m.Mons[n].Addrs.String())
	}
	b.WriteByte('}')
	return b.String()
}

// legacyRanks orders monitors as Ceph does for maps older than version
// 6: by their legacy (or first) address, then by name.
func legacyRanks(mons map[string]MonInfo) []string {
	names := sortedKeys(mons)
	sort.SliceStable(names, func(i, j int) bool {
		c := mons[names[i]].Addrs.LegacyOrFront().Compare(mons[names[j]].Addrs.LegacyOrFront())
		return c < 0 || (c == 0 && names[i] < names[j])
	})
	return names
}

// inferRelease derives min_mon_release for maps older than version 7.
func inferRelease(features uint64) uint8 {
	switch {
	case features&MonFeatureNautilus != 0:
		return ReleaseNautilus
	case features&MonFeatureMimic != 0:
		return ReleaseMimic
	case features&MonFeatureLuminous != 0:
		return ReleaseLuminous
	case features&MonFeatureKraken != 0:
		return ReleaseKraken
	}
	return ReleaseUnknown
}

// decodeMonFeatures reads a mon_feature_t: a versioned u64.
func decodeMonFeatures(d *denc.Decoder, what string) uint64 {
	var f uint64
	d.Versioned(what, 1, func(d *denc.Decoder, _ uint8) { f = d.U64(what) })
	return f
}

func encodeMonFeatures(e *denc.Encoder, f uint64) {
	e.Versioned(1, 1, func(e *denc.Encoder) { e.U64(f) })
}

// decodeStrings reads a vector<string> or set<string>.
func decodeStrings(d *denc.Decoder, what string) []string {
	return denc.List(d, what, 4, func(d *denc.Decoder) string { return d.String(what) })
}

func encodeStrings(e *denc.Encoder, s []string) {
	denc.PutList(e, s, func(e *denc.Encoder, v string) { e.String(v) })
}

// encodeStringSet writes s sorted, as a std::set<string> is encoded.
func encodeStringSet(e *denc.Encoder, s []string) {
	sorted := append([]string(nil), s...)
	sort.Strings(sorted)
	encodeStrings(e, sorted)
}

func decodeStringMap(d *denc.Decoder, what string) map[string]string {
	return denc.Map(d, what, 8, func(d *denc.Decoder) (string, string) {
		return d.String(what + " key"), d.String(what + " value")
	})
}

func encodeStringMap(e *denc.Encoder, m map[string]string) {
	denc.PutMap(e, m, sortedKeys(m), func(e *denc.Encoder, k, v string) {
		e.String(k)
		e.String(v)
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
