package crush

import (
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/rados/denc"
)

// hostileMap encodes a CRUSH map of nullBuckets empty bucket slots, then
// (when straw2Items > 0) one straw2 bucket of that many devices, no
// rules, default tunables, and the choose_args section chooseArgs writes.
func hostileMap(nullBuckets, straw2Items int, chooseArgs func(e *denc.Encoder)) []byte {
	e := denc.NewEncoder(nil)
	e.U32(crushMagic)
	buckets := nullBuckets
	if straw2Items > 0 {
		buckets++
	}
	e.I32(int32(buckets)) // max_buckets
	e.U32(0)              // max_rules
	e.I32(int32(straw2Items))
	for range nullBuckets {
		e.U32(0)
	}
	if straw2Items > 0 {
		e.U32(AlgStraw2)
		e.I32(int32(-1 - nullBuckets))
		e.U16(1)
		e.U8(AlgStraw2)
		e.U8(0)
		e.U32(uint32(straw2Items) << 16)
		e.U32(uint32(straw2Items))
		for i := range straw2Items {
			e.I32(int32(i))
		}
		for range straw2Items {
			e.U32(0x10000)
		}
	}
	for range 3 { // type, name and rule name maps
		e.U32(0)
	}
	t := LegacyTunables()
	e.U32(t.ChooseLocalTries)
	e.U32(t.ChooseLocalFallbackTries)
	e.U32(t.ChooseTotalTries)
	e.U32(0) // chooseleaf_descend_once
	e.U8(0)  // chooseleaf_vary_r
	e.U8(0)  // straw_calc_version
	e.U32(t.AllowedBucketAlgs | 1<<AlgStraw2)
	e.U8(0)       // chooseleaf_stable
	for range 3 { // class_map, class_name, class_bucket
		e.U32(0)
	}
	chooseArgs(e)
	return e.Bytes()
}

// decodeWithinBound decodes b, which must decode, and fails if that
// allocated more than alloctest allows for its size.
func decodeWithinBound(t *testing.T, b []byte) *Map {
	t.Helper()
	var m *Map
	var err error
	got := alloctest.Measure(len(b), func() { m, err = Decode(b) })
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if got > alloctest.Limit(len(b)) {
		t.Fatalf("decoding %d bytes allocated %d bytes (limit %d)", len(b), got, alloctest.Limit(len(b)))
	}
	return m
}

// TestChooseArgsAllocation: every choose_args entry used to cost an
// array of all the map's buckets, so 32 KiB of entries over 4000 empty
// bucket slots allocated a quarter of a gigabyte (issue 22, item 4).
func TestChooseArgsAllocation(t *testing.T) {
	const entries = 1300
	b := hostileMap(4000, 0, func(e *denc.Encoder) {
		e.U32(entries)
		for i := range entries {
			e.I64(int64(i))
			e.U32(0) // no bucket arguments
		}
	})
	if len(b) > 32<<10 {
		t.Fatalf("the map is %d bytes, meant to be at most 32 KiB", len(b))
	}
	if m := decodeWithinBound(t, b); len(m.ChooseArgs) != entries {
		t.Fatalf("%d choose_args entries decoded, want %d", len(m.ChooseArgs), entries)
	}
}

// TestWeightSetPaddingAllocation: weight sets shorter than their bucket
// used to be padded to the bucket's size, so thousands of empty sets of
// 4 bytes each over a bucket of thousands of items allocated the
// product.
func TestWeightSetPaddingAllocation(t *testing.T) {
	const items, positions = 2000, 4000
	b := hostileMap(0, items, func(e *denc.Encoder) {
		e.U32(1) // one choose_args entry
		e.I64(DefaultChooseArgs)
		e.U32(1) // for one bucket
		e.U32(0) // bucket index 0
		e.U32(positions)
		for range positions {
			e.U32(0) // an empty weight set
		}
		e.U32(0) // no ids
	})
	m := decodeWithinBound(t, b)
	// Empty weight sets weigh every item 0: straw2 then takes the first
	// item, as Ceph does with the zero-padded sets.
	a := m.ChooseArgsFor(7)[0]
	if got := straw2Choose(m.Buckets[0], 1, 0, &a, 0); got != 0 {
		t.Fatalf("straw2 with all-zero weight set chose %d, want the first item 0", got)
	}
}
