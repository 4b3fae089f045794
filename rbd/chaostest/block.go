package chaostest

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// BlockSize is the unit the workload writes and checks: every aligned
// BlockSize bytes of an image hold one self-describing block.
const BlockSize = 4096

// Block layout, all little-endian:
//
//	[0:8)     magic "PRBDchao"
//	[8:16)    image tag (derived from the seed and the image's name)
//	[16:24)   the block's own byte offset in the image
//	[24:32)   version (1, 2, ... per block; 0 is "never written": zeroes)
//	[32:4092) payload, a pseudo-random stream of (seed, tag, offset, version)
//	[4092:4096) crc32c of bytes [0:4092)
const (
	blockMagic  = "PRBDchao"
	payloadFrom = 32
	crcAt       = BlockSize - 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// splitmix64 is the payload generator: fast, and every (key, index) gives
// the same word on every run.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// payloadKey mixes what identifies one version of one block.
func payloadKey(seed, tag, off, version uint64) uint64 {
	return splitmix64(splitmix64(splitmix64(seed^tag)^off) ^ version)
}

// fillBlock writes version of the block at off into b (len BlockSize).
func fillBlock(b []byte, seed, tag, off, version uint64) {
	copy(b[0:8], blockMagic)
	binary.LittleEndian.PutUint64(b[8:16], tag)
	binary.LittleEndian.PutUint64(b[16:24], off)
	binary.LittleEndian.PutUint64(b[24:32], version)
	key := payloadKey(seed, tag, off, version)
	for i := payloadFrom; i+8 <= crcAt; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], splitmix64(key+uint64(i)))
	}
	binary.LittleEndian.PutUint32(b[crcAt:], crc32.Checksum(b[:crcAt], castagnoli))
}

// blockContent is what a block read back turned out to hold.
type blockContent struct {
	zero    bool   // all zeroes (never written, or discarded)
	version uint64 // when not zero and ok
	bad     string // why the block is corrupt ("" when it decoded)
}

// decodeBlock checks the block b read at off of the image tagged tag.
func decodeBlock(b []byte, seed, tag, off uint64) blockContent {
	if isZero(b) {
		return blockContent{zero: true}
	}
	if string(b[0:8]) != blockMagic {
		return blockContent{bad: fmt.Sprintf("no block magic (starts % x)", b[0:8])}
	}
	if got, want := binary.LittleEndian.Uint32(b[crcAt:]), crc32.Checksum(b[:crcAt], castagnoli); got != want {
		return blockContent{bad: fmt.Sprintf("crc %#08x, computed %#08x (torn or damaged)", got, want)}
	}
	if t := binary.LittleEndian.Uint64(b[8:16]); t != tag {
		return blockContent{bad: fmt.Sprintf("block of another image (tag %#x, want %#x)", t, tag)}
	}
	if o := binary.LittleEndian.Uint64(b[16:24]); o != off {
		return blockContent{bad: fmt.Sprintf("block written for offset %d (misplaced)", o)}
	}
	v := binary.LittleEndian.Uint64(b[24:32])
	key := payloadKey(seed, tag, off, v)
	for i := payloadFrom; i+8 <= crcAt; i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != splitmix64(key+uint64(i)) {
			return blockContent{bad: fmt.Sprintf("payload of version %d differs at byte %d", v, i)}
		}
	}
	return blockContent{version: v}
}

func isZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
