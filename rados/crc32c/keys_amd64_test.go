package crc32c

import (
	"math/bits"
	"testing"

	"golang.org/x/sys/cpu"
)

// xPowMod is x^e mod P for the CRC-32C polynomial P, as a polynomial with
// bit m the coefficient of x^m.
func xPowMod(e int) uint32 {
	const poly = 0x1EDC6F41 // P without its x^32 term, bit m = x^m
	r := uint32(1)
	for range e {
		carry := r&0x80000000 != 0
		r <<= 1
		if carry {
			r ^= poly
		}
	}
	return r
}

// foldKey is the pair of multipliers that moves a 128-bit lane d bits
// towards the end of the message. A lane holds the bit-reflected message:
// bit k is the coefficient of x^(127-k), so its low quadword is the high
// half a·x^64 and its high quadword the low half b. A carry-less product
// of two reflected quadwords lands one degree low, so the multipliers are
// x^(d+64-1) for the low quadword and x^(d-1) for the high one, reflected
// into 64 bits.
func foldKey(d int) [2]uint64 {
	return [2]uint64{
		bits.Reverse64(uint64(xPowMod(d + 63))),
		bits.Reverse64(uint64(xPowMod(d - 1))),
	}
}

func TestFoldKeys(t *testing.T) {
	var want [6]uint64
	for i, d := range []int{2048, 512, 128} {
		k := foldKey(d)
		want[2*i], want[2*i+1] = k[0], k[1]
	}
	if foldKeys != want {
		t.Errorf("foldKeys = %#x, derived %#x", foldKeys, want)
	}
}

// TestFoldTaken makes sure the comparisons in crc32c_test.go exercise the
// vector path on a machine that has it, and that a machine without it
// never takes it.
func TestFoldTaken(t *testing.T) {
	want := foldMin + 256
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512VPCLMULQDQ {
		want = 0
	}
	if got := foldable(foldMin + 300); got != want {
		t.Fatalf("foldable(%d) = %d, want %d (AVX-512F %v, VPCLMULQDQ %v)", foldMin+300, got, want,
			cpu.X86.HasAVX512F, cpu.X86.HasAVX512VPCLMULQDQ)
	}
	if got := foldable(foldMin - 1); got != 0 {
		t.Fatalf("foldable(%d) = %d, want 0", foldMin-1, got)
	}
}
