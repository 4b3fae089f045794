package osdmap

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/purerbd/purerbd/rados/denc"
)

func TestStrHashLinux(t *testing.T) {
	// hash = (hash + (c << 4) + (c >> 4)) * 11, by hand.
	for s, want := range map[string]uint32{"": 0, "a": 17138, "ab": 205832} {
		if got := StrHash(StrHashLinux, []byte(s)); got != want {
			t.Errorf("linux(%q) = %d, want %d", s, got, want)
		}
	}
	if got := StrHash(7, []byte("x")); got != 0xffffffff {
		t.Errorf("unknown hash type gave %#x", got)
	}
}

func TestStableMod(t *testing.T) {
	// pg_num 12: mask 15; seeds 12..15 fold onto 4..7.
	for x, want := range map[uint32]uint32{0: 0, 11: 11, 12: 4, 15: 7, 16: 0, 27: 11, 28: 4} {
		if got := StableMod(x, 12, 15); got != want {
			t.Errorf("stable_mod(%d, 12, 15) = %d, want %d", x, got, want)
		}
	}
}

func BenchmarkPGToUpActing(b *testing.B) {
	m := readMap(b, filepath.Join("testdata", "live-16.2.15", "up.89.bin"))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m.PGToUpActing(denc.PG{Pool: 2, Seed: uint32(i)})
	}
}

func BenchmarkMapObject(b *testing.B) {
	m := readMap(b, filepath.Join("testdata", "live-16.2.15", "up.89.bin"))
	b.ReportAllocs()
	for b.Loop() {
		m.MapObject("rbd_data.10226b8b4567.00000000000003e7", Locator{Pool: 2})
	}
}

// TestObjectToPGMatchesCephOSDMap checks name and namespace hashing
// against `ceph osd map rbd NAME [NAMESPACE] -f json` on a live 16.2.15
// cluster (raw_pgid; pool rbd, rjenkins, 32 PGs).
func TestObjectToPGMatchesCephOSDMap(t *testing.T) {
	m := &OSDMap{Pools: map[int64]*Pool{1: {ObjectHash: StrHashRjenkins, PGNum: 32, PGPNum: 32}}}
	m.Pools[1].calcMasks()
	for _, c := range []struct {
		name, ns  string
		raw, fold uint32
	}{
		{"foo", "", 0x7fc1f406, 0x6},
		{"foo", "ns", 0xac17f0b6, 0x16},
		{"rbd_data.1.0", "alpha", 0x3785daf8, 0x18},
		{"x", `\x1f`, 0x23277ea4, 0x4},
		{"abc.def.0000", "n/s", 0x43a480f1, 0x11},
	} {
		pg, err := m.ObjectToPG(c.name, Locator{Pool: 1, Namespace: c.ns})
		if err != nil {
			t.Fatal(err)
		}
		if pg.Seed != c.raw || m.Pools[1].RawPGToPG(pg).Seed != c.fold {
			t.Errorf("%q in %q: raw %#x folded %#x, want %#x %#x", c.name, c.ns, pg.Seed,
				m.Pools[1].RawPGToPG(pg).Seed, c.raw, c.fold)
		}
	}
	// A locator key replaces the name; an explicit hash replaces both.
	byKey, _ := m.ObjectToPG("anything", Locator{Pool: 1, Key: "foo", Namespace: "ns"})
	byHash, _ := m.ObjectToPG("anything", Locator{Pool: 1, Hash: 0xac17f0b6, HasHash: true})
	if byKey.Seed != 0xac17f0b6 || byHash.Seed != 0xac17f0b6 {
		t.Errorf("key %#x, hash %#x, want 0xac17f0b6", byKey.Seed, byHash.Seed)
	}
	if _, err := m.ObjectToPG("foo", Locator{Pool: 9}); !errors.Is(err, ErrNoPool) {
		t.Errorf("missing pool: %v", err)
	}
}
