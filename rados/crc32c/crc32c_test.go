package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"
)

// reference is ceph_crc32c by hash/crc32 alone.
func reference(crc uint32, p []byte) uint32 {
	return ^crc32.Update(^crc, castagnoli, p)
}

func TestUpdateMatchesHashCRC32(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20+512)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, 7, 255, 256, 1023, 1024, 1025, 1279, 1280, 1536, 4096, 4097, 65536, 1 << 20}
	for range 200 {
		lengths = append(lengths, rng.IntN(1<<16))
	}
	for _, n := range lengths {
		for _, off := range []int{0, 1, 13, 64} {
			seed := rng.Uint32()
			p := buf[off : off+n]
			if got, want := Update(seed, p), reference(seed, p); got != want {
				t.Fatalf("Update(%#x, %d bytes at +%d) = %#x, want %#x", seed, n, off, got, want)
			}
		}
	}
}

func TestChecksumKnownValue(t *testing.T) {
	// CRC-32C check value of "123456789" is 0xe3069283 with the usual
	// inversions; ceph_crc32c(-1, ...) skips only the final one.
	if got, want := Checksum([]byte("123456789")), ^uint32(0xe3069283); got != want {
		t.Fatalf("Checksum = %#x, want %#x", got, want)
	}
	// msgr2's crc of an empty segment is the seed itself.
	if got := Checksum(nil); got != 0xffffffff {
		t.Fatalf("Checksum(nil) = %#x", got)
	}
}

func TestUpdateIsIncremental(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := make([]byte, 300000)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	whole := Checksum(p)
	for _, cut := range []int{1, 1000, 4096, 123457} {
		if got := Update(Checksum(p[:cut]), p[cut:]); got != whole {
			t.Fatalf("split at %d: %#x, want %#x", cut, got, whole)
		}
	}
}

// TestSlicing8 checks the tables against hash/crc32 over lengths around
// the 8-byte step and seeds at random.
func TestSlicing8(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	buf := make([]byte, 70000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, 7, 8, 9, 15, 16, 17, 4096, 65536, 70000}
	for range 300 {
		lengths = append(lengths, rng.IntN(len(buf)))
	}
	for _, n := range lengths {
		off := rng.IntN(len(buf) - n + 1)
		seed := rng.Uint32()
		p := buf[off : off+n]
		if got, want := updateSlicing8(seed, p), reference(seed, p); got != want {
			t.Fatalf("updateSlicing8(%#x, %d bytes at +%d) = %#x, want %#x", seed, n, off, got, want)
		}
	}
}

func TestClearlyFaster(t *testing.T) {
	for _, c := range []struct {
		a, b time.Duration
		want bool
	}{
		{time.Microsecond, 10 * time.Microsecond, true},  // an emulator's CRC32
		{10 * time.Microsecond, time.Microsecond, false}, // hardware
		{9 * time.Microsecond, 10 * time.Microsecond, false},
		{0, time.Microsecond, false}, // a clock too coarse to tell
	} {
		if got := clearlyFaster(c.a, c.b); got != c.want {
			t.Errorf("clearlyFaster(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestHardwareKeepsInstruction: on a CPU that runs these tests natively
// the calibration must keep hash/crc32, which uses the CPU's CRC32
// instruction (SSE 4.2, ARMv8) or, without one, tables of its own that
// are no slower than these.
func TestHardwareKeepsInstruction(t *testing.T) {
	if tablesFaster() {
		t.Fatal("the calibration chose tables over hash/crc32 on this CPU")
	}
}

func benchmarkUpdate(b *testing.B, n int, f func(uint32, []byte) uint32) {
	p := make([]byte, n)
	b.SetBytes(int64(n))
	for b.Loop() {
		f(0, p)
	}
}

func BenchmarkUpdate(b *testing.B) {
	for _, n := range []struct {
		name string
		size int
	}{{"4K", 4096}, {"64K", 65536}, {"4M", 4 << 20}} {
		b.Run(n.name, func(b *testing.B) { benchmarkUpdate(b, n.size, Update) })
		b.Run(n.name+"/hash-crc32", func(b *testing.B) { benchmarkUpdate(b, n.size, reference) })
		b.Run(n.name+"/tables", func(b *testing.B) { benchmarkUpdate(b, n.size, updateSlicing8) })
	}
}
