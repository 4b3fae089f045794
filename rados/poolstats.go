package rados

import (
	"context"
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

// Pool and cluster usage as the monitors report it (librados'
// get_pool_stats and cluster_stat): MGetPoolStats and MStatfs, answered
// from the statistics the manager sends the monitors.

const (
	msgStatfs            = 13 // CEPH_MSG_STATFS
	msgStatfsReply       = 14 // CEPH_MSG_STATFS_REPLY
	msgGetPoolStats      = 58 // CEPH_MSG_GETPOOLSTATS
	msgGetPoolStatsReply = 59 // CEPH_MSG_GETPOOLSTATSREPLY
)

// PoolStat is one pool's usage, with librados' pool_stat_t fields.
type PoolStat struct {
	// Bytes is what the pool occupies: data and omap allocated on the
	// OSDs when they report per pool, otherwise the logical bytes.
	Bytes                    uint64
	Objects                  uint64
	ObjectClones             uint64
	ObjectCopies             uint64
	ObjectsMissingOnPrimary  uint64
	ObjectsUnfound           uint64
	ObjectsDegraded          uint64
	ReadOps, ReadKB          uint64
	WriteOps, WriteKB        uint64
	CompressedBytesAllocated uint64 // compressed data as stored
	CompressedBytesOriginal  uint64 // that data before compression
}

// KB is Bytes in KiB, rounded up, as librados reports num_kb.
func (s PoolStat) KB() uint64 { return (s.Bytes + 1023) >> 10 }

// ClusterStat is the cluster's raw capacity and object count (ceph_statfs).
type ClusterStat struct {
	KB, KBUsed, KBAvail uint64
	Objects             uint64
}

// PoolStats returns the usage of the named pools, keyed by name. A pool
// the monitors have no figures for (it does not exist, or the manager
// has not reported it yet) is missing from the map, as librados leaves
// it out.
func (c *Conn) PoolStats(ctx context.Context, pools []string) (map[string]PoolStat, error) {
	e := denc.NewEncoder(nil)
	denc.EncodePaxosHeader(e, 0)
	c.mc.FSID().Encode(e)
	e.U32(uint32(len(pools)))
	for _, p := range pools {
		e.String(p)
	}
	m := &msgr.Message{Type: msgGetPoolStats, Version: 1, CompatVersion: 1, Front: e.Bytes()}
	rep, err := c.mc.Request(ctx, m, msgGetPoolStatsReply)
	if err != nil {
		return nil, fmt.Errorf("rados: pool stats: %w", err)
	}
	return decodePoolStatsReply(rep.Front, rep.Version)
}

// ClusterStat returns the cluster's capacity, usage and object count.
func (c *Conn) ClusterStat(ctx context.Context) (ClusterStat, error) {
	e := denc.NewEncoder(nil)
	denc.EncodePaxosHeader(e, 0)
	c.mc.FSID().Encode(e)
	e.U8(0) // no data pool: the whole cluster
	m := &msgr.Message{Type: msgStatfs, Version: 2, CompatVersion: 1, Front: e.Bytes()}
	rep, err := c.mc.Request(ctx, m, msgStatfsReply)
	if err != nil {
		return ClusterStat{}, fmt.Errorf("rados: cluster stat: %w", err)
	}
	return decodeStatfsReply(rep.Front)
}

func decodeStatfsReply(b []byte) (ClusterStat, error) {
	d := denc.NewDecoder(b)
	var fsid denc.UUID
	fsid.Decode(d)
	d.U64("statfs version")
	s := ClusterStat{KB: d.U64("kb"), KBUsed: d.U64("kb_used"), KBAvail: d.U64("kb_avail"), Objects: d.U64("num_objects")}
	if err := d.Err(); err != nil {
		return s, fmt.Errorf("rados: MStatfsReply: %w", err)
	}
	return s, nil
}

// decodePoolStatsReply reads MGetPoolStatsReply and derives each pool's
// figures as librados does.
func decodePoolStatsReply(b []byte, version uint16) (map[string]PoolStat, error) {
	d := denc.NewDecoder(b)
	denc.DecodePaxosHeader(d)
	var fsid denc.UUID
	fsid.Decode(d)
	n := d.Count("pool stats", 4)
	raw := make(map[string]rawPoolStat, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		name := d.String("pool name")
		raw[name] = decodePoolStat(d)
	}
	perPool := version >= 2 && d.Bool("per_pool")
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("rados: MGetPoolStatsReply: %w", err)
	}
	out := make(map[string]PoolStat, len(raw))
	for name, r := range raw {
		out[name] = r.derive(perPool)
	}
	return out, nil
}

// rawPoolStat holds the parts of pool_stat_t that librados reports.
type rawPoolStat struct {
	sum [11]uint64 // num_bytes .. num_wr_kb of object_stat_sum_t
	hitSetArchiveBytes,
	omapBytes uint64
	store [10]uint64 // store_statfs_t
}

// store_statfs_t field positions.
const (
	storeAllocated              = 3
	storeDataCompressedAlloc    = 6
	storeDataCompressedOriginal = 7
	storeOmapAllocated          = 8
)

// decodePoolStat reads a pool_stat_t: the object_stat_collection_t (an
// object_stat_sum_t and an empty category map), log sizes, up and
// acting counts, store_statfs_t and the number of store reports.
func decodePoolStat(d *denc.Decoder) rawPoolStat {
	var r rawPoolStat
	d.Versioned("pool_stat_t", 7, func(d *denc.Decoder, _ uint8) {
		d.Versioned("object_stat_collection_t", 2, func(d *denc.Decoder, _ uint8) {
			d.Versioned("object_stat_sum_t", 20, func(d *denc.Decoder, v uint8) {
				for i := range r.sum {
					r.sum[i] = d.U64("object_stat_sum_t")
				}
				// scrub errors .. objects misplaced
				d.Skip("object_stat_sum_t", 11*8)
				r.hitSetArchiveBytes = d.U64("num_bytes_hit_set_archive")
				// flush .. promote, four i32 cache modes, pinned, missing
				d.Skip("object_stat_sum_t", 5*8+4*4+2*8)
				if v >= 19 {
					// legacy snapsets, large omap objects, manifests
					d.Skip("object_stat_sum_t", 3*8)
					r.omapBytes = d.U64("num_omap_bytes")
				}
			})
		})
		d.I64("log_size")
		d.I64("ondisk_log_size")
		d.I32("up")
		d.I32("acting")
		d.Versioned("store_statfs_t", 1, func(d *denc.Decoder, _ uint8) {
			for i := range r.store {
				r.store[i] = d.U64("store_statfs_t")
			}
		})
	})
	return r
}

// derive computes librados' figures (pool_stat_t's allocated bytes):
// the OSDs' per-pool store reports when every OSD sends them, otherwise
// the logical sums.
func (r rawPoolStat) derive(perPool bool) PoolStat {
	s := PoolStat{
		Objects: r.sum[1], ObjectClones: r.sum[2], ObjectCopies: r.sum[3],
		ObjectsMissingOnPrimary: r.sum[4], ObjectsDegraded: r.sum[5], ObjectsUnfound: r.sum[6],
		ReadOps: r.sum[7], ReadKB: r.sum[8], WriteOps: r.sum[9], WriteKB: r.sum[10],
		CompressedBytesAllocated: r.store[storeDataCompressedAlloc],
		CompressedBytesOriginal:  r.store[storeDataCompressedOriginal],
	}
	if perPool {
		s.Bytes = r.store[storeAllocated] + r.store[storeOmapAllocated]
	} else {
		s.Bytes = r.sum[0] + r.hitSetArchiveBytes + r.omapBytes
	}
	return s
}
