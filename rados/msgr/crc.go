package msgr

import "hash/crc32"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32c computes Ceph's ceph_crc32c(seed, p): the CRC-32C register
// without the customary pre- and post-inversion, continued from seed.
// Go's crc32.Update inverts on entry and exit, hence the double inversion.
func crc32c(seed uint32, p []byte) uint32 {
	return ^crc32.Update(^seed, castagnoli, p)
}

// segmentCRC is the crc msgr2 sends for a frame segment in crc mode.
func segmentCRC(seg []byte) uint32 { return crc32c(^uint32(0), seg) }
