package osdmap

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/purerbd/purerbd/rados/crush"
	"github.com/purerbd/purerbd/rados/denc"
)

// GapError is returned by Apply when an incremental does not follow the
// map's epoch: the caller must ask the monitors for a full map (or the
// missing incrementals).
type GapError struct {
	Have uint32 // the map's epoch
	Got  uint32 // the incremental's epoch
}

func (e *GapError) Error() string {
	return fmt.Sprintf("osdmap: incremental for epoch %d cannot apply to epoch %d (need %d)",
		e.Got, e.Have, e.Have+1)
}

// ErrFSIDMismatch is returned when an incremental belongs to another
// cluster.
var ErrFSIDMismatch = errors.New("osdmap: incremental is for another cluster")

// ErrBadIncremental is wrapped when an incremental names OSDs beyond
// max_osd or is otherwise inconsistent with the map (Ceph would abort).
var ErrBadIncremental = errors.New("osdmap: inconsistent incremental")

// Apply returns the map that results from applying inc, which must be for
// exactly the next epoch. m itself is not modified.
func (m *OSDMap) Apply(inc *Incremental) (*OSDMap, error) {
	if inc.Epoch != 1 && inc.FSID != m.FSID {
		return nil, fmt.Errorf("%w: map %s, incremental %s", ErrFSIDMismatch, m.FSID, inc.FSID)
	}
	if inc.Epoch != m.Epoch+1 {
		return nil, &GapError{Have: m.Epoch, Got: inc.Epoch}
	}
	if len(inc.FullMap) > 0 {
		full, err := Decode(inc.FullMap)
		if err != nil {
			return nil, fmt.Errorf("osdmap: incremental %d full map: %w", inc.Epoch, err)
		}
		return full, nil
	}
	n := m.clone()
	if inc.Epoch == 1 {
		n.FSID = inc.FSID
	}
	if limit := max(m.MaxOSD, maxOSDGrowth); inc.NewMaxOSD > limit {
		return nil, fmt.Errorf("%w: epoch %d sets max_osd %d, above %d", ErrBadIncremental, inc.Epoch, inc.NewMaxOSD, limit)
	}
	if err := n.apply(inc); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *OSDMap) apply(inc *Incremental) error {
	var own owned
	n.Epoch++
	n.Modified = inc.Modified

	if inc.NewFlags >= 0 {
		n.Flags = uint32(inc.NewFlags)
		const kraken, jewel = releaseLuminous - 1, releaseLuminous - 2
		if n.Flags&flagRequireKraken != 0 {
			if releaseLess(n.RequireOSDRelease, kraken) {
				n.RequireOSDRelease = kraken
			}
		} else if n.Flags&flagRequireJewel != 0 {
			if releaseLess(n.RequireOSDRelease, jewel) {
				n.RequireOSDRelease = jewel
			}
		}
	}
	if inc.NewMaxOSD > maxOSDLimit {
		return fmt.Errorf("%w: max_osd %d", ErrBadIncremental, inc.NewMaxOSD)
	}
	if inc.NewMaxOSD >= 0 {
		n.setMaxOSD(inc.NewMaxOSD)
		own = ownedAll
	}
	if err := n.checkOSDs(inc); err != nil {
		return err
	}
	if inc.NewPoolMax != -1 {
		n.PoolMax = int32(inc.NewPoolMax)
	}
	for id, p := range inc.NewPools {
		if p == nil {
			continue
		}
		cp := *p
		cp.LastChange = n.Epoch
		n.Pools[id] = &cp
	}

	n.NewRemovedSnaps = inc.NewRemovedSnaps
	n.NewPurgedSnaps = inc.NewPurgedSnaps
	for pool, s := range n.NewRemovedSnaps {
		n.RemovedSnapsQueue[pool] = n.RemovedSnapsQueue[pool].union(s)
	}
	for pool, s := range n.NewPurgedSnaps {
		q, ok := n.RemovedSnapsQueue[pool]
		if !ok {
			return fmt.Errorf("%w: purged snaps for pool %d with nothing queued", ErrBadIncremental, pool)
		}
		if q = q.subtract(s); len(q) == 0 {
			delete(n.RemovedSnapsQueue, pool)
		} else {
			n.RemovedSnapsQueue[pool] = q
		}
	}
	if !inc.NewLastUpChange.IsZero() {
		n.LastUpChange = inc.NewLastUpChange
	}
	if !inc.NewLastInChange.IsZero() {
		n.LastInChange = inc.NewLastInChange
	}
	for id, name := range inc.NewPoolNames {
		n.PoolNames[id] = name
	}
	for _, id := range inc.OldPools {
		delete(n.Pools, id)
		delete(n.PoolNames, id)
	}

	if len(inc.NewWeight) > 0 {
		own.copy(n, vecWeight|vecState|vecXInfo)
	}
	for osd, w := range inc.NewWeight {
		n.OSDWeight[osd] = w
		if w != 0 {
			n.OSDState[osd] |= StateExists
			// Marking in clears the auto-out and new bits.
			n.OSDState[osd] &^= StateAutoOut | StateNew
			n.OSDXInfo[osd].OldWeight = 0
		}
	}
	if len(inc.NewPrimaryAffinity) > 0 {
		own.copy(n, vecAffinity)
	}
	for osd, a := range inc.NewPrimaryAffinity {
		n.setPrimaryAffinity(osd, a)
	}
	for _, name := range inc.OldErasureCodeProfiles {
		delete(n.ErasureCodeProfiles, name)
	}
	for name, prof := range inc.NewErasureCodeProfiles {
		n.ErasureCodeProfiles[name] = prof
	}

	if len(inc.NewState) > 0 {
		own.copy(n, vecState|vecInfo|vecXInfo|vecUUID|vecAffinity|vecAddrs)
	}
	for _, osd := range sortedKeys(inc.NewState) {
		s := inc.NewState[osd]
		if s == 0 {
			s = StateUp
		}
		if n.OSDState[osd]&StateUp != 0 && s&StateUp != 0 {
			n.OSDInfo[osd].DownAt = n.Epoch
			n.OSDXInfo[osd].DownStamp = n.Modified
		}
		if n.OSDState[osd]&StateExists != 0 && s&StateExists != 0 {
			// The OSD is destroyed: forget everything about it.
			n.OSDUUID[osd] = denc.UUID{}
			n.OSDInfo[osd] = OSDInfo{}
			n.OSDXInfo[osd] = OSDXInfo{}
			n.setPrimaryAffinity(osd, DefaultPrimaryAffinity)
			n.ClientAddrs[osd] = nil
			n.ClusterAddrs[osd] = nil
			n.HBFrontAddrs[osd] = nil
			n.HBBackAddrs[osd] = nil
			n.OSDState[osd] = 0
		} else {
			n.OSDState[osd] ^= s
		}
	}
	if len(inc.NewUpClient) > 0 {
		own.copy(n, vecState|vecInfo|vecAddrs)
	}
	for osd, addrs := range inc.NewUpClient {
		n.OSDState[osd] |= StateExists | StateUp
		n.OSDState[osd] &^= StateStop
		n.ClientAddrs[osd] = addrs
		n.HBBackAddrs[osd] = inc.NewHBBackUp[osd]
		n.HBFrontAddrs[osd] = inc.NewHBFrontUp[osd]
		n.OSDInfo[osd].UpFrom = n.Epoch
	}
	if len(inc.NewUpCluster) > 0 {
		own.copy(n, vecAddrs)
	}
	for osd, addrs := range inc.NewUpCluster {
		n.ClusterAddrs[osd] = addrs
	}
	if len(inc.NewUpThru)+len(inc.NewLastCleanInterval)+len(inc.NewLost) > 0 {
		own.copy(n, vecInfo)
	}
	for osd, e := range inc.NewUpThru {
		n.OSDInfo[osd].UpThru = e
	}
	for osd, iv := range inc.NewLastCleanInterval {
		n.OSDInfo[osd].LastCleanBegin = iv[0]
		n.OSDInfo[osd].LastCleanEnd = iv[1]
	}
	for osd, e := range inc.NewLost {
		n.OSDInfo[osd].LostAt = e
	}
	if len(inc.NewXInfo) > 0 {
		own.copy(n, vecXInfo)
	}
	for osd, x := range inc.NewXInfo {
		n.OSDXInfo[osd] = x
	}
	if len(inc.NewUUID) > 0 {
		own.copy(n, vecUUID)
	}
	for osd, u := range inc.NewUUID {
		n.OSDUUID[osd] = u
	}

	for pg, osds := range inc.NewPGTemp {
		if len(osds) == 0 {
			delete(n.PGTemp, pg)
		} else {
			n.PGTemp[pg] = osds
		}
	}
	for pg, osd := range inc.NewPrimaryTemp {
		if osd == -1 {
			delete(n.PrimaryTemp, pg)
		} else {
			n.PrimaryTemp[pg] = osd
		}
	}
	for pg, osds := range inc.NewPGUpmap {
		n.PGUpmap[pg] = osds
	}
	for _, pg := range inc.OldPGUpmap {
		delete(n.PGUpmap, pg)
	}
	for pg, items := range inc.NewPGUpmapItems {
		n.PGUpmapItems[pg] = items
	}
	for _, pg := range inc.OldPGUpmapItems {
		delete(n.PGUpmapItems, pg)
	}
	for pg, prim := range inc.NewPGUpmapPrimary {
		n.PGUpmapPrimaries[pg] = prim
	}
	for _, pg := range inc.OldPGUpmapPrimary {
		delete(n.PGUpmapPrimaries, pg)
	}

	// Existing entries keep their expiry, as std::map::insert keeps them.
	for a, t := range inc.NewBlocklist {
		if _, ok := n.Blocklist[a]; !ok {
			n.Blocklist[a] = t
		}
	}
	for _, a := range inc.OldBlocklist {
		delete(n.Blocklist, a)
	}
	for a, t := range inc.NewRangeBlocklist {
		if _, ok := n.RangeBlocklist[a]; !ok {
			n.RangeBlocklist[a] = t
		}
	}
	for _, a := range inc.OldRangeBlocklist {
		delete(n.RangeBlocklist, a)
	}
	for id, f := range inc.NewCrushNodeFlags {
		if f != 0 {
			n.CrushNodeFlags[id] = f
		} else {
			delete(n.CrushNodeFlags, id)
		}
	}
	for id, f := range inc.NewDeviceClassFlags {
		if f != 0 {
			n.DeviceClassFlags[id] = f
		} else {
			delete(n.DeviceClassFlags, id)
		}
	}

	if inc.ClusterSnapshot != "" {
		n.ClusterSnapshot = inc.ClusterSnapshot
		n.ClusterSnapshotEpoch = inc.Epoch
	} else {
		n.ClusterSnapshot = ""
		n.ClusterSnapshotEpoch = 0
	}
	if inc.NewNearfullRatio >= 0 {
		n.NearfullRatio = inc.NewNearfullRatio
	}
	if inc.NewBackfillfullRatio >= 0 {
		n.BackfillfullRatio = inc.NewBackfillfullRatio
	}
	if inc.NewFullRatio >= 0 {
		n.FullRatio = inc.NewFullRatio
	}
	if releaseLess(0, inc.NewRequireMinCompatClient) {
		n.RequireMinCompatClient = inc.NewRequireMinCompatClient
	}
	if releaseAtLeast(inc.NewRequireOSDRelease, 0) {
		n.RequireOSDRelease = inc.NewRequireOSDRelease
		if releaseAtLeast(n.RequireOSDRelease, releaseLuminous) {
			n.Flags &^= legacyRequireFlags
			n.Flags |= flagRecoveryDeletes
		}
		if releaseAtLeast(n.RequireOSDRelease, releaseNautilus) {
			n.Flags |= flagPGLogHardLimit
		}
	}

	// The new CRUSH map goes last, after the up/down changes.
	if len(inc.Crush) > 0 {
		cm, err := crush.Decode(inc.Crush)
		if err != nil {
			return fmt.Errorf("osdmap: incremental %d crush map: %w", inc.Epoch, err)
		}
		n.Crush = cm
		if releaseAtLeast(n.RequireOSDRelease, releaseLuminous) {
			n.CrushVersion++
		}
		for class := range n.DeviceClassFlags {
			if _, ok := cm.ClassNames[class]; !ok {
				delete(n.DeviceClassFlags, class)
			}
		}
	}
	if inc.ChangeStretchMode {
		n.StretchModeEnabled = inc.StretchModeEnabled
		n.StretchBucketCount = inc.NewStretchBucketCount
		n.DegradedStretchMode = inc.NewDegradedStretchMode
		n.RecoveringStretchMode = inc.NewRecoveringStretchMode
		n.StretchModeBucket = inc.NewStretchModeBucket
	}
	switch inc.MutateAllowCrimson {
	case CrimsonSet:
		n.AllowCrimson = true
	case CrimsonClear:
		n.AllowCrimson = false
	}
	return nil
}

// checkOSDs refuses an incremental that names OSDs outside [0, max_osd).
func (n *OSDMap) checkOSDs(inc *Incremental) error {
	var bad []int32
	check := func(osd int32) {
		if osd < 0 || osd >= n.MaxOSD {
			bad = append(bad, osd)
		}
	}
	for _, m := range []map[int32]uint32{inc.NewWeight, inc.NewPrimaryAffinity, inc.NewState,
		inc.NewUpThru, inc.NewLost} {
		for osd := range m {
			check(osd)
		}
	}
	for _, m := range []map[int32]denc.EntityAddrVec{inc.NewUpClient, inc.NewUpCluster} {
		for osd := range m {
			check(osd)
		}
	}
	for osd := range inc.NewLastCleanInterval {
		check(osd)
	}
	for osd := range inc.NewXInfo {
		check(osd)
	}
	for osd := range inc.NewUUID {
		check(osd)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: epoch %d names osds %v beyond max_osd %d", ErrBadIncremental, inc.Epoch, bad, n.MaxOSD)
	}
	return nil
}

// maxOSDGrowth is the highest max_osd an incremental may set on a map
// whose max_osd is lower. new_max_osd is a value, not a count: four bytes
// of it would otherwise size every per-OSD vector (a few hundred bytes per
// OSD) up to maxOSDLimit. Monitors refuse `osd setmaxosd` beyond
// mon_max_osd, 10000 by default; this leaves that more than sixfold room.
// A map already larger may keep or shrink its size, and a full map, whose
// per-OSD vectors are in its encoding, is bounded by maxOSDLimit alone.
const maxOSDGrowth = 1 << 16

// vector names the per-OSD vectors of an OSDMap that Apply may change.
type vector uint16

const (
	vecState vector = 1 << iota
	vecWeight
	vecInfo
	vecXInfo
	vecUUID
	vecAffinity
	vecAddrs // client, cluster and both heartbeat address vectors
)

// owned records which per-OSD vectors the map Apply builds has copied.
// The others still share their arrays with the map Apply started from,
// which must not change; they are copied on first write, so an
// incremental that changes one OSD's weight copies the weights only,
// and one that changes no OSD copies nothing.
type owned vector

const ownedAll = owned(vecState | vecWeight | vecInfo | vecXInfo | vecUUID | vecAffinity | vecAddrs)

// copy gives n its own copies of the vectors vs not copied yet.
func (o *owned) copy(n *OSDMap, vs vector) {
	need := vs &^ vector(*o)
	cloneIf(need&vecState != 0, &n.OSDState)
	cloneIf(need&vecWeight != 0, &n.OSDWeight)
	cloneIf(need&vecInfo != 0, &n.OSDInfo)
	cloneIf(need&vecXInfo != 0, &n.OSDXInfo)
	cloneIf(need&vecUUID != 0, &n.OSDUUID)
	cloneIf(need&vecAffinity != 0, &n.PrimaryAffinity)
	for _, a := range []*[]denc.EntityAddrVec{&n.ClientAddrs, &n.ClusterAddrs, &n.HBBackAddrs, &n.HBFrontAddrs} {
		cloneIf(need&vecAddrs != 0, a)
	}
	*o |= owned(vs)
}

// cloneIf replaces *s by a copy when need is set.
func cloneIf[T any](need bool, s *[]T) {
	if need {
		*s = slices.Clone(*s)
	}
}

// setMaxOSD resizes every per-OSD vector into new arrays, new OSDs
// starting out of the cluster.
func (n *OSDMap) setMaxOSD(max int32) {
	size := int(max)
	n.MaxOSD = max
	n.OSDState = resize(n.OSDState, size, 0)
	n.OSDWeight = resize(n.OSDWeight, size, WeightOut)
	n.OSDInfo = resize(n.OSDInfo, size, OSDInfo{})
	n.OSDXInfo = resize(n.OSDXInfo, size, OSDXInfo{})
	n.ClientAddrs = resize(n.ClientAddrs, size, nil)
	n.ClusterAddrs = resize(n.ClusterAddrs, size, nil)
	n.HBBackAddrs = resize(n.HBBackAddrs, size, nil)
	n.HBFrontAddrs = resize(n.HBFrontAddrs, size, nil)
	n.OSDUUID = resize(n.OSDUUID, size, denc.UUID{})
	if n.PrimaryAffinity != nil {
		n.PrimaryAffinity = resize(n.PrimaryAffinity, size, DefaultPrimaryAffinity)
	}
}

func (n *OSDMap) setPrimaryAffinity(osd int32, a uint32) {
	if n.PrimaryAffinity == nil {
		n.PrimaryAffinity = make([]uint32, n.MaxOSD)
		for i := range n.PrimaryAffinity {
			n.PrimaryAffinity[i] = DefaultPrimaryAffinity
		}
	}
	n.PrimaryAffinity[osd] = a
}

// resize returns a new array of n elements: those of s, then fill.
func resize[T any](s []T, n int, fill T) []T {
	out := make([]T, n)
	copy(out, s)
	for i := len(s); i < n; i++ {
		out[i] = fill
	}
	return out
}

func sortedKeys[V any](m map[int32]V) []int32 {
	keys := slices.Collect(maps.Keys(m))
	slices.Sort(keys)
	return keys
}

// clone copies the maps Apply may change. Pools, the CRUSH map and
// per-PG lists are replaced, never modified, so they are shared; so are
// the per-OSD vectors until Apply writes to them (see owned).
func (m *OSDMap) clone() *OSDMap {
	n := *m
	n.Pools = cloneMap(m.Pools)
	n.PoolNames = cloneMap(m.PoolNames)
	n.PGTemp = cloneMap(m.PGTemp)
	n.PrimaryTemp = cloneMap(m.PrimaryTemp)
	n.ErasureCodeProfiles = cloneMap(m.ErasureCodeProfiles)
	n.PGUpmap = cloneMap(m.PGUpmap)
	n.PGUpmapItems = cloneMap(m.PGUpmapItems)
	n.PGUpmapPrimaries = cloneMap(m.PGUpmapPrimaries)
	n.Blocklist = cloneMap(m.Blocklist)
	n.RemovedSnapsQueue = cloneMap(m.RemovedSnapsQueue)
	n.CrushNodeFlags = cloneMap(m.CrushNodeFlags)
	n.DeviceClassFlags = cloneMap(m.DeviceClassFlags)
	n.RangeBlocklist = cloneMap(m.RangeBlocklist)
	return &n
}

// cloneMap copies a map, turning nil into an empty map so Apply can
// write to it.
func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	maps.Copy(out, m)
	return out
}
