package crc32c

import "hash/crc32"

// castagnoli is hash/crc32's own (shared, read-only) Castagnoli table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Update returns ceph_crc32c(crc, p): the CRC-32C register continued from
// crc over p, with no inversion on entry or exit.
func Update(crc uint32, p []byte) uint32 {
	if n := foldable(len(p)); n > 0 {
		crc = fold(crc, p[:n])
		p = p[n:]
	}
	if len(p) > 0 && tablesFaster() {
		return updateSlicing8(crc, p)
	}
	return ^crc32.Update(^crc, castagnoli, p)
}

// Checksum is the crc msgr2 puts on a segment and the OSD map on its
// encodings: Update seeded with all ones.
func Checksum(p []byte) uint32 { return Update(^uint32(0), p) }
