package osdmap

import (
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
		m.MapObject("rbd_data.10226b8b4567.00000000000003e7", Locator{Pool: 2, Hash: -1})
	}
}
