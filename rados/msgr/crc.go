package msgr

import "github.com/purerbd/purerbd/rados/crc32c"

// segmentCRC is the crc msgr2 sends for a frame segment in crc mode.
func segmentCRC(seg []byte) uint32 { return crc32c.Checksum(seg) }
