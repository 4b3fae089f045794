package rados

import (
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/rados/denc"
)

// encodePoolStat encodes a pool_stat_t as a Pacific monitor does: an
// object_stat_sum_t of version 20 whose i-th 64-bit field is sum(i)
// (the four 32-bit cache modes zero), and store_statfs_t fields
// store(i).
func encodePoolStat(e *denc.Encoder, sum, store func(i int) uint64) {
	e.Versioned(7, 5, func(e *denc.Encoder) {
		e.Versioned(2, 2, func(e *denc.Encoder) {
			e.Versioned(20, 14, func(e *denc.Encoder) {
				for i := range 28 {
					e.U64(sum(i))
				}
				for range 4 {
					e.U32(0)
				}
				for i := 28; i < 36; i++ {
					e.U64(sum(i))
				}
			})
			e.U32(0) // no categories
		})
		e.I64(2)
		e.I64(2)
		e.I32(1)
		e.I32(1)
		e.Versioned(1, 1, func(e *denc.Encoder) {
			for i := range 10 {
				e.U64(store(i))
			}
		})
		e.I64(1)
	})
}

// encodePoolStatsReply encodes an MGetPoolStatsReply (version 2).
func encodePoolStatsReply(perPool bool, pools ...string) []byte {
	e := denc.NewEncoder(nil)
	denc.EncodePaxosHeader(e, 0)
	denc.UUID{1, 2, 3}.Encode(e)
	e.U32(uint32(len(pools)))
	for _, p := range pools {
		e.String(p)
		encodePoolStat(e, func(i int) uint64 { return uint64(1000 + i) }, func(i int) uint64 { return uint64(100 + i) })
	}
	e.Bool(perPool)
	return e.Bytes()
}

// TestPoolStatsLikeLibrados checks which fields librados' pool_stat_t
// takes from where: the logical sums (data, hit-set archives and omap)
// without per-pool store reports, the store's allocation with them.
func TestPoolStatsLikeLibrados(t *testing.T) {
	for _, perPool := range []bool{false, true} {
		stats, err := decodePoolStatsReply(encodePoolStatsReply(perPool, "a", "b"), 2)
		if err != nil {
			t.Fatal(err)
		}
		want := PoolStat{Bytes: 1000 + 1022 + 1033, Objects: 1001, ObjectClones: 1002, ObjectCopies: 1003,
			ObjectsMissingOnPrimary: 1004, ObjectsDegraded: 1005, ObjectsUnfound: 1006,
			ReadOps: 1007, ReadKB: 1008, WriteOps: 1009, WriteKB: 1010,
			CompressedBytesAllocated: 106, CompressedBytesOriginal: 107}
		if perPool {
			want.Bytes = 103 + 108 // allocated data and omap
		}
		if len(stats) != 2 || stats["a"] != want || stats["b"] != want {
			t.Errorf("per pool %v: %+v, want %+v", perPool, stats, want)
		}
	}
	if s := (PoolStat{Bytes: 1025}); s.KB() != 2 {
		t.Errorf("KB of 1025 bytes: %d", s.KB())
	}
}

func FuzzPoolStatsReply(f *testing.F) {
	f.Add(encodePoolStatsReply(false, "rbd"), uint16(2))
	f.Add(encodePoolStatsReply(true, "a", "b"), uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, version uint16) {
		alloctest.Check(t, len(b), func() { _, _ = decodePoolStatsReply(b, version) })
	})
}

func FuzzStatfsReply(f *testing.F) {
	e := denc.NewEncoder(nil)
	denc.UUID{1}.Encode(e)
	for i := range 5 {
		e.U64(uint64(i))
	}
	f.Add(e.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		alloctest.Check(t, len(b), func() { _, _ = decodeStatfsReply(b) })
	})
}
