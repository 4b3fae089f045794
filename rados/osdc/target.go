package osdc

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/osdmap"
)

// base is what a request (or a watch) is addressed to, before any map
// is consulted.
type base struct {
	oloc  denc.ObjectLocator // pool, namespace, locator key; Hash -1
	oid   string
	pg    *denc.PG // placement-group requests (listing): the raw PG
	flags uint32
}

// target is where a request goes under one map: Ceph's op_target_t.
type target struct {
	epoch    uint32
	oloc     denc.ObjectLocator // after cache tiering
	rawPG    denc.PG            // full-precision placement seed
	pgid     denc.PG            // folded into pg_num
	spg      denc.SPG           // with the shard for erasure-coded pools
	mapping  osdmap.Mapping
	size     uint8
	minSize  uint8
	pgNum    uint32
	pgpNum   uint32
	pending  uint32 // pg_num_pending
	osd      int32  // the OSD to send to; -1 for none
	paused   bool
	forcedAt uint32 // the pool's last_force_op_resend when computed
}

// mappingCache remembers the placement of the placement groups requests
// went to under one map, so that CRUSH runs once per PG and map rather
// than once per request (Ceph's objecter keeps the same cache).
type mappingCache struct {
	m   *osdmap.OSDMap
	pgs sync.Map // denc.PG -> osdmap.Mapping
	// near remembers each OSD's CRUSH distance from the objecter's
	// crush location (localized reads): int32 OSD -> locality
	near sync.Map
}

// locality is an OSD's lowest common CRUSH ancestor type with the
// client's location; ok false when they share none.
type locality struct {
	dist int32
	ok   bool
}

// localityOf returns osd's locality under m for the client at loc,
// computed once per map (loc is the objecter's, fixed).
func (c *mappingCache) localityOf(m *osdmap.OSDMap, osd int32, loc map[string]string) locality {
	if c != nil && c.m == m {
		if v, ok := c.near.Load(osd); ok {
			return v.(locality)
		}
	}
	var l locality
	if m.Crush != nil {
		l.dist, l.ok = m.Crush.CommonAncestorDistance(osd, loc)
	}
	if c != nil && c.m == m {
		c.near.Store(osd, l)
	}
	return l
}

// mapping returns the placement of pg under m.
func (c *mappingCache) mapping(m *osdmap.OSDMap, pg denc.PG) osdmap.Mapping {
	if c == nil || c.m != m {
		return m.PGToUpActing(pg)
	}
	if v, ok := c.pgs.Load(pg); ok {
		return v.(osdmap.Mapping)
	}
	mp := m.PGToUpActing(pg)
	c.pgs.Store(pg, mp)
	return mp
}

// mappings returns the cache for m, starting a new one when the map
// changed.
func (o *Objecter) mappings(m *osdmap.OSDMap) *mappingCache {
	c := o.mcache.Load()
	if c == nil || c.m != m {
		c = &mappingCache{m: m}
		o.mcache.Store(c)
	}
	return c
}

// calcTarget computes b's target under m. An error means the pool does
// not exist (ErrPoolNotFound) or is flagged EIO (ErrPoolEIO). cache may
// be nil. loc is the client's CRUSH location, for localized reads.
func calcTarget(m *osdmap.OSDMap, b *base, cache *mappingCache, loc map[string]string) (target, error) {
	t := target{epoch: m.Epoch, osd: -1, oloc: b.oloc}
	pool := m.Pool(b.oloc.Pool)
	if pool == nil {
		return t, fmt.Errorf("%w: pool %d at epoch %d", ErrPoolNotFound, b.oloc.Pool, m.Epoch)
	}
	if pool.Flags&osdmap.PoolFlagEIO != 0 {
		return t, fmt.Errorf("%w: pool %d", ErrPoolEIO, b.oloc.Pool)
	}
	isRead, isWrite := b.flags&FlagRead != 0, b.flags&FlagWrite != 0
	if b.flags&FlagIgnoreOverlay == 0 {
		if isRead && pool.ReadTier >= 0 {
			t.oloc.Pool = pool.ReadTier
		}
		if isWrite && pool.WriteTier >= 0 {
			t.oloc.Pool = pool.WriteTier
		}
		if t.oloc.Pool != b.oloc.Pool {
			if pool = m.Pool(t.oloc.Pool); pool == nil {
				return t, fmt.Errorf("%w: tier pool %d of pool %d", ErrPoolNotFound, t.oloc.Pool, b.oloc.Pool)
			}
		}
	}
	if b.pg != nil {
		t.rawPG = denc.PG{Pool: uint64(t.oloc.Pool), Seed: b.pg.Seed}
	} else {
		loc := osdmap.Locator{Pool: t.oloc.Pool, Namespace: t.oloc.Namespace, Key: t.oloc.Key}
		if t.oloc.Hash >= 0 {
			loc.Hash, loc.HasHash = uint32(t.oloc.Hash), true
		}
		pg, err := m.ObjectToPG(b.oid, loc)
		if err != nil {
			return t, fmt.Errorf("%w: %v", ErrPoolNotFound, err)
		}
		t.rawPG = pg
	}
	t.pgid = pool.RawPGToPG(t.rawPG)
	t.mapping = cache.mapping(m, t.pgid)
	t.size, t.minSize = pool.Size, pool.MinSize
	t.pgNum, t.pgpNum, t.pending = pool.PGNum, pool.PGPNum, pool.PGNumPending
	t.forcedAt = pool.LastForceOpResend
	t.spg = denc.SPG{PG: t.pgid, Shard: denc.NoShard}
	if pool.Type == osdmap.PoolTypeErasure {
		for i, o := range t.mapping.Acting {
			if o == t.mapping.ActingPrimary {
				t.spg.Shard = int8(i)
				break
			}
		}
	}
	t.osd = t.mapping.ActingPrimary
	if isRead && !isWrite && b.flags&FlagLocalizeReads != 0 && len(loc) > 0 &&
		pool.Type != osdmap.PoolTypeErasure && len(t.mapping.Acting) > 1 {
		t.osd = nearestReplica(m, cache, t.mapping.Acting, loc)
	}
	pauseRead := m.Flags&MapFlagPauseRead != 0
	full := m.Flags&MapFlagFull != 0 || pool.Flags&osdmap.PoolFlagFull != 0
	respectsFull := isWrite && b.flags&(FlagFullTry|FlagFullForce) == 0
	pauseWrite := m.Flags&MapFlagPauseWrite != 0 || (respectsFull && full)
	t.paused = (isRead && pauseRead) || (isWrite && pauseWrite)
	return t, nil
}

// needsResend reports whether a request sent under t must be sent again
// under n: its placement changed in a way that makes the OSD drop or
// misdirect it (a new primary or acting set — Ceph's new interval — a
// split or merge, a resend the pool forces), or it can go now that the
// map no longer pauses it.
func (t *target) needsResend(n *target) bool {
	switch {
	case t.osd != n.osd, t.pgid != n.pgid, t.spg != n.spg,
		t.mapping.ActingPrimary != n.mapping.ActingPrimary,
		t.mapping.UpPrimary != n.mapping.UpPrimary,
		!slices.Equal(t.mapping.Acting, n.mapping.Acting),
		!slices.Equal(t.mapping.Up, n.mapping.Up),
		t.size != n.size, t.minSize != n.minSize,
		t.pgNum != n.pgNum, t.pending != n.pending,
		t.paused && !n.paused,
		n.forcedAt > t.epoch && n.forcedAt != t.forcedAt:
		return true
	}
	return false
}

// hobject is the object as OSDs sort it, for backoff ranges.
func (t *target) hobject(oid string) HObject {
	return HObject{
		Key:       t.oloc.Key,
		OID:       oid,
		Snap:      SnapHead,
		Hash:      t.rawPG.Seed,
		Pool:      t.oloc.Pool,
		Namespace: t.oloc.Namespace,
	}
}

// Location is where an object lives under the current map.
type Location struct {
	Epoch uint32
	RawPG denc.PG // full-precision placement seed
	PG    denc.PG // the placement group (folded into pg_num)
	osdmap.Mapping
}

// Locate computes where an object lives, as `ceph osd map` reports it.
func (o *Objecter) Locate(pool int64, ns, key, oid string) (Location, error) {
	m := o.osdmap.Load()
	if m == nil {
		return Location{}, errors.New("osdc: no OSD map yet")
	}
	b := base{oloc: denc.ObjectLocator{Pool: pool, Namespace: ns, Key: key, Hash: -1}, oid: oid, flags: FlagRead | FlagIgnoreOverlay}
	t, err := calcTarget(m, &b, o.mappings(m), nil)
	if err != nil {
		return Location{}, err
	}
	return Location{Epoch: t.epoch, RawPG: t.rawPG, PG: t.pgid, Mapping: t.mapping}, nil
}

// nearestReplica is the acting OSD to read from for a client at loc, as
// Ceph's objecter picks it for CEPH_OSD_FLAG_LOCALIZE_READS: the one
// whose lowest common CRUSH ancestor with loc is of the lowest type,
// the first of the acting set (the primary) on a tie or when none
// shares an ancestor with loc.
func nearestReplica(m *osdmap.OSDMap, cache *mappingCache, acting []int32, loc map[string]string) int32 {
	best, bestDist, bestOK := acting[0], int32(0), false
	for i, osd := range acting {
		l := cache.localityOf(m, osd, loc)
		if i == 0 || (l.ok && bestOK && l.dist < bestDist) || (!bestOK && l.ok) {
			best, bestDist, bestOK = osd, l.dist, l.ok
		}
	}
	return best
}
