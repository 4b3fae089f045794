package osdmap

import (
	"maps"
	"slices"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/rados/denc"
)

// The fuzz targets' seeds (testdata/fuzz/Fuzz*) are the corpus samples of
// each type and the live 16.2.15 captures. Full maps and incrementals are
// fuzzed past their crc check, which would otherwise stop nearly every
// mutation at the door.

// exerciseWorkBound is the most work (bucket items weighed, see
// crush.Map.WorkBound) exercise spends on one map: well under a second.
const exerciseWorkBound = 4e6

// exercise maps a few placement groups and an object of every pool of a
// fuzzed map. Ceph's mapper bounds its work only by what the map says
// (retry tunables, set_choose_tries steps, replica counts, bucket
// sizes), so a map asking for billions of tries maps that slowly in Ceph
// too: pools whose rule could cost more than what is left of
// exerciseWorkBound are skipped. Seed 109055dd342fc7d7 (a choose step
// asking for 2^31-1 replicas of a type no bucket has) kept exercise busy
// for minutes before.
func exercise(m *OSDMap) {
	if m.Crush == nil {
		return
	}
	ids := slices.Sorted(maps.Keys(m.Pools))
	budget := exerciseWorkBound
	for _, id := range ids {
		p := m.Pools[id]
		if p == nil || p.Size > 16 {
			continue
		}
		calls := float64(min(p.PGNum, 8) + 1)
		cost := 0.0
		if r := m.Crush.FindRule(int(p.CrushRule), int(p.Type), int(p.Size)); r >= 0 {
			cost = calls * m.Crush.WorkBound(r, int(p.Size))
		}
		if cost > budget {
			continue
		}
		budget -= cost
		for ps := uint32(0); ps < min(p.PGNum, 8); ps++ {
			m.PGToUpActing(denc.PG{Pool: uint64(id), Seed: ps})
		}
		m.MapObject("rbd_data.1234.0000000000000001", Locator{Pool: id, Namespace: "ns"})
	}
}

func FuzzOSDMapDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var m *OSDMap
		var err error
		alloctest.Check(t, len(data), func() { m, err = decodeOSDMap(data, false) })
		if err != nil {
			return
		}
		exercise(m)
	})
}

func FuzzIncrementalDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var inc *Incremental
		var err error
		alloctest.Check(t, len(data), func() { inc, err = decodeIncremental(data, false) })
		if err != nil {
			return
		}
		if inc.NewMaxOSD > 4096 || len(inc.FullMap) > 0 {
			return
		}
		base := &OSDMap{Epoch: inc.Epoch - 1, FSID: inc.FSID}
		if inc.Epoch == 0 {
			return
		}
		if next, err := base.Apply(inc); err == nil {
			exercise(next)
		}
	})
}

func FuzzPoolDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var p *Pool
		var err error
		alloctest.Check(t, len(data), func() { p, err = DecodePool(data) })
		if err != nil {
			return
		}
		p.HashKey("obj", "ns")
		p.RawPGToPPS(p.RawPGToPG(denc.PG{Pool: 3, Seed: 0xdeadbeef}))
	})
}
