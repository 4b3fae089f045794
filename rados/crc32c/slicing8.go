package crc32c

import "encoding/binary"

// slicing8Tables are the tables of the slicing-by-8 algorithm for CRC-32C,
// built once and only read after.
var slicing8Tables = makeSlicing8Tables()

// makeSlicing8Tables extends hash/crc32's Castagnoli table (the first of
// the eight) to the seven that take a byte 1 to 7 places further on.
func makeSlicing8Tables() *[8][256]uint32 {
	var t [8][256]uint32
	t[0] = *castagnoli
	for i := range 256 {
		crc := t[0][i]
		for j := 1; j < 8; j++ {
			crc = t[0][crc&0xff] ^ crc>>8
			t[j][i] = crc
		}
	}
	return &t
}

// updateSlicing8 continues the bare register crc over p eight bytes at a
// time with table lookups alone: no instruction beyond loads, shifts and
// xors, which every CPU and every emulator runs at its full speed.
func updateSlicing8(crc uint32, p []byte) uint32 {
	t := slicing8Tables
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint32(p)
		crc = t[0][p[7]] ^ t[1][p[6]] ^ t[2][p[5]] ^ t[3][p[4]] ^
			t[4][crc>>24] ^ t[5][crc>>16&0xff] ^ t[6][crc>>8&0xff] ^ t[7][crc&0xff]
		p = p[8:]
	}
	for _, b := range p {
		crc = t[0][byte(crc)^b] ^ crc>>8
	}
	return crc
}
