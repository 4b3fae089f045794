package crc32c

import "golang.org/x/sys/cpu"

// foldMin is the shortest input worth the vector path: below it the
// setup and the final reduction cost more than hash/crc32's loop.
const foldMin = 1024

// foldable is how many leading bytes of an n-byte input fold512 takes: a
// multiple of its 256-byte block, or 0 when the CPU lacks the instructions
// or n is short.
func foldable(n int) int {
	if n < foldMin || !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512VPCLMULQDQ {
		return 0
	}
	return n &^ 255
}

// fold continues crc over p, whose length foldable chose.
func fold(crc uint32, p []byte) uint32 { return fold512(crc, p, &foldKeys) }

// fold512 is in fold_amd64.s. len(p) is a non-zero multiple of 256.
//
//go:noescape
func fold512(crc uint32, p []byte, keys *[6]uint64) uint32
