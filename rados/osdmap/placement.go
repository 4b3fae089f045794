package osdmap

import (
	"errors"
	"fmt"

	"github.com/purerbd/purerbd/rados/crush"
	"github.com/purerbd/purerbd/rados/denc"
)

// ErrNoPool is returned when a pool id is not in the map.
var ErrNoPool = errors.New("osdmap: no such pool")

// Locator names an object for placement: its pool, optional namespace,
// and optional locator key (which replaces the name for hashing). With
// HasHash, Hash is used directly as the placement seed instead.
type Locator struct {
	Pool      int64
	Namespace string
	Key       string
	Hash      uint32
	HasHash   bool
}

// ObjectToPG maps an object to its raw placement group (full-precision
// seed; see Pool.RawPGToPG), as OSDMap::object_locator_to_pg does.
func (m *OSDMap) ObjectToPG(name string, loc Locator) (denc.PG, error) {
	p := m.Pools[loc.Pool]
	if p == nil {
		return denc.PG{}, fmt.Errorf("%w: %d", ErrNoPool, loc.Pool)
	}
	if loc.HasHash {
		return denc.PG{Pool: uint64(loc.Pool), Seed: loc.Hash}, nil
	}
	key := name
	if loc.Key != "" {
		key = loc.Key
	}
	return denc.PG{Pool: uint64(loc.Pool), Seed: p.HashKey(key, loc.Namespace)}, nil
}

// Mapping is where a placement group lives.
type Mapping struct {
	Up            []int32 // the OSDs CRUSH (and upmaps) choose, down ones removed
	UpPrimary     int32
	Acting        []int32 // the OSDs serving I/O now (pg_temp, else Up)
	ActingPrimary int32   // the OSD to send requests to; -1 if none
}

// PGToUpActing computes the up and acting sets of a placement group, as
// OSDMap::_pg_to_up_acting_osds does. The seed may be raw (full
// precision): it is folded into pg_num. A pool that does not exist maps to
// empty sets and primaries of -1.
func (m *OSDMap) PGToUpActing(pg denc.PG) Mapping {
	none := Mapping{UpPrimary: -1, ActingPrimary: -1}
	pool := m.Pools[int64(pg.Pool)]
	if pool == nil {
		return none
	}
	acting, actingPrimary := m.tempOSDs(pool, pg)

	raw, pps := m.rawOSDs(pool, pg)
	m.applyUpmap(pool, pg, &raw)
	up := m.rawToUp(pool, raw)
	upPrimary := pickPrimary(up)
	up, upPrimary = m.applyPrimaryAffinity(pps, pool, up, upPrimary)

	if len(acting) == 0 {
		acting = up
		if actingPrimary == -1 {
			actingPrimary = upPrimary
		}
	}
	return Mapping{Up: up, UpPrimary: upPrimary, Acting: acting, ActingPrimary: actingPrimary}
}

// RawOSDs returns CRUSH's choice for a placement group with nonexistent
// OSDs removed (no upmaps, no temps), and its first OSD.
func (m *OSDMap) RawOSDs(pg denc.PG) ([]int32, int32) {
	pool := m.Pools[int64(pg.Pool)]
	if pool == nil {
		return nil, -1
	}
	raw, _ := m.rawOSDs(pool, pg)
	return raw, pickPrimary(raw)
}

// rawOSDs runs the pool's CRUSH rule for the placement seed.
func (m *OSDMap) rawOSDs(pool *Pool, pg denc.PG) ([]int32, uint32) {
	pps := pool.RawPGToPPS(pg)
	size := int(pool.Size)
	var osds []int32
	if m.Crush != nil {
		// Pacific's find_rule: the rule must also match the pool's type
		// and size; later releases encode rules that always match.
		if rule := m.Crush.FindRule(int(pool.CrushRule), int(pool.Type), size); rule >= 0 {
			osds = m.Crush.DoRule(rule, pps, size, m.OSDWeight, m.Crush.ChooseArgsFor(int64(pg.Pool)))
		}
	}
	return m.removeNonexistent(pool, osds), pps
}

func (m *OSDMap) removeNonexistent(pool *Pool, osds []int32) []int32 {
	if pool.CanShiftOSDs() {
		out := osds[:0]
		for _, o := range osds {
			if m.Exists(o) {
				out = append(out, o)
			}
		}
		return out
	}
	for i, o := range osds {
		if !m.Exists(o) {
			osds[i] = crushItemNone
		}
	}
	return osds
}

func pickPrimary(osds []int32) int32 {
	for _, o := range osds {
		if o != crushItemNone {
			return o
		}
	}
	return -1
}

// markedOut reports whether an explicit upmap target is an OSD with
// weight 0 (such mappings are ignored).
func (m *OSDMap) markedOut(osd int32) bool {
	return osd != crushItemNone && osd < m.MaxOSD && osd >= 0 && m.OSDWeight[osd] == 0
}

// applyUpmap applies pg_upmap, then pg_upmap_items, then
// pg_upmap_primaries.
func (m *OSDMap) applyUpmap(pool *Pool, rawPG denc.PG, raw *[]int32) {
	pg := pool.RawPGToPG(rawPG)
	if targets, ok := m.PGUpmap[pg]; ok {
		apply := true
		for _, o := range targets {
			if m.markedOut(o) {
				apply = false // reject the explicit mapping
				break
			}
		}
		if !apply {
			return
		}
		*raw = append([]int32(nil), targets...)
	}
	if items, ok := m.PGUpmapItems[pg]; ok {
		r := *raw
		for _, it := range items {
			exists := false
			pos := -1
			for i, o := range r {
				if o == it.To {
					exists = true
					break
				}
				if o == it.From && pos < 0 && !m.markedOut(it.To) {
					pos = i
				}
			}
			if !exists && pos >= 0 {
				r[pos] = it.To
			}
		}
	}
	if prim, ok := m.PGUpmapPrimaries[pg]; ok {
		if prim != crushItemNone && prim < m.MaxOSD && prim >= 0 && m.OSDWeight[prim] != 0 {
			r := *raw
			for i := 1; i < len(r); i++ {
				if r[i] == prim {
					r[i] = r[0]
					r[0] = prim
					break
				}
			}
		}
	}
}

// rawToUp drops (replicated) or blanks (erasure) down OSDs.
func (m *OSDMap) rawToUp(pool *Pool, raw []int32) []int32 {
	if pool.CanShiftOSDs() {
		up := make([]int32, 0, len(raw))
		for _, o := range raw {
			if m.Exists(o) && !m.IsDown(o) {
				up = append(up, o)
			}
		}
		return up
	}
	up := make([]int32, len(raw))
	for i, o := range raw {
		if !m.Exists(o) || m.IsDown(o) {
			up[i] = crushItemNone
		} else {
			up[i] = o
		}
	}
	return up
}

// applyPrimaryAffinity picks the primary honouring primary affinity:
// each candidate is rejected with probability 1-affinity (hashed with
// the placement seed), the first rejected one kept as a fallback. In
// replicated pools the chosen primary moves to the front.
func (m *OSDMap) applyPrimaryAffinity(seed uint32, pool *Pool, osds []int32, primary int32) ([]int32, int32) {
	if m.PrimaryAffinity == nil {
		return osds, primary
	}
	any := false
	for _, o := range osds {
		if o != crushItemNone && m.Affinity(o) != DefaultPrimaryAffinity {
			any = true
			break
		}
	}
	if !any {
		return osds, primary
	}
	pos := -1
	for i, o := range osds {
		if o == crushItemNone {
			continue
		}
		a := m.Affinity(o)
		if a < MaxPrimaryAffinity && crush.Hash32_2(crush.HashRjenkins1, seed, uint32(o))>>16 >= a {
			// Not this one; remember it in case nobody else qualifies.
			if pos < 0 {
				pos = i
			}
		} else {
			pos = i
			break
		}
	}
	if pos < 0 {
		return osds, primary
	}
	primary = osds[pos]
	if pool.CanShiftOSDs() && pos > 0 {
		copy(osds[1:pos+1], osds[:pos])
		osds[0] = primary
	}
	return osds, primary
}

// tempOSDs returns the pg_temp set (down OSDs dropped or blanked) and the
// primary_temp, or pg_temp's first OSD.
func (m *OSDMap) tempOSDs(pool *Pool, rawPG denc.PG) ([]int32, int32) {
	pg := pool.RawPGToPG(rawPG)
	var temp []int32
	if osds, ok := m.PGTemp[pg]; ok {
		for _, o := range osds {
			if !m.Exists(o) || m.IsDown(o) {
				if pool.CanShiftOSDs() {
					continue
				}
				temp = append(temp, crushItemNone)
			} else {
				temp = append(temp, o)
			}
		}
	}
	primary := int32(-1)
	if p, ok := m.PrimaryTemp[pg]; ok {
		primary = p
	} else {
		for _, o := range temp {
			if o != crushItemNone {
				primary = o
				break
			}
		}
	}
	return temp, primary
}

// MapObject maps an object name to its placement group (folded into
// pg_num) and where that group lives.
func (m *OSDMap) MapObject(name string, loc Locator) (denc.PG, Mapping, error) {
	raw, err := m.ObjectToPG(name, loc)
	if err != nil {
		return denc.PG{}, Mapping{}, err
	}
	pg := m.Pools[loc.Pool].RawPGToPG(raw)
	return pg, m.PGToUpActing(pg), nil
}
