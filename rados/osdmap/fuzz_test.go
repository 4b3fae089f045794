package osdmap

import (
	"testing"

	"github.com/purerbd/purerbd/rados/denc"
)

// The fuzz targets' seeds (testdata/fuzz/Fuzz*) are the corpus samples of
// each type and the live 16.2.15 captures. Full maps and incrementals are
// fuzzed past their crc check, which would otherwise stop nearly every
// mutation at the door.

// mappable reports whether a fuzzed map is cheap enough to run CRUSH on.
func mappable(m *OSDMap) bool {
	if m.Crush == nil {
		return false
	}
	t := m.Crush.Tunables
	return t.ChooseTotalTries <= 100 && t.ChooseLocalTries <= 10 && t.ChooseLocalFallbackTries <= 10 &&
		len(m.Crush.Buckets) <= 64
}

func exercise(m *OSDMap) {
	if !mappable(m) {
		return
	}
	for id, p := range m.Pools {
		if p == nil || p.Size > 16 {
			continue
		}
		for ps := uint32(0); ps < min(p.PGNum, 8); ps++ {
			m.PGToUpActing(denc.PG{Pool: uint64(id), Seed: ps})
		}
		m.MapObject("rbd_data.1234.0000000000000001", Locator{Pool: id, Namespace: "ns"})
	}
}

func FuzzOSDMapDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeOSDMap(data, false)
		if err != nil {
			return
		}
		exercise(m)
	})
}

func FuzzIncrementalDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		inc, err := decodeIncremental(data, false)
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
		p, err := DecodePool(data)
		if err != nil {
			return
		}
		p.HashKey("obj", "ns")
		p.RawPGToPPS(p.RawPGToPG(denc.PG{Pool: 3, Seed: 0xdeadbeef}))
	})
}
