// Package crc32c computes CRC-32C (Castagnoli) the way Ceph does: its
// ceph_crc32c(seed, data) continues a bare register from seed, without the
// pre- and post-inversion of the usual CRC-32C convention (and of Go's
// hash/crc32). msgr2 frames, OSD map and object map checksums all use it.
//
// On amd64 processors with AVX-512 and VPCLMULQDQ, long inputs are folded
// 256 bytes at a time with carry-less multiplication, several times faster
// than hash/crc32's SSE 4.2 loop; everything else goes to hash/crc32,
// unless tables (slicing by 8) are clearly faster on this CPU, as under an
// emulator that translates the CRC32 instruction slowly (choose.go).
package crc32c
