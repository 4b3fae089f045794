package osdmap

import "github.com/purerbd/purerbd/rados/internal/jenkins"

// Object hash types (pg_pool_t object_hash, CEPH_STR_HASH_*).
const (
	StrHashLinux    = 1
	StrHashRjenkins = 2
)

// StrHash is ceph_str_hash: the object-name hash a pool uses to pick a
// placement seed. Unknown hash types give 0xffffffff, as in Ceph.
func StrHash(typ uint8, s []byte) uint32 {
	switch typ {
	case StrHashLinux:
		return strHashLinux(s)
	case StrHashRjenkins:
		return strHashRjenkins(s)
	}
	return 0xffffffff
}

// strHashLinux is the Linux dcache name hash.
func strHashLinux(s []byte) uint32 {
	var h uint32
	for _, c := range s {
		h = (h + uint32(c)<<4 + uint32(c)>>4) * 11
	}
	return h
}

func le32(k []byte) uint32 {
	return uint32(k[0]) | uint32(k[1])<<8 | uint32(k[2])<<16 | uint32(k[3])<<24
}

// strHashRjenkins is Bob Jenkins' lookup2 hash of a byte string with the
// golden-ratio initial value, as ceph_str_hash_rjenkins computes it.
func strHashRjenkins(k []byte) uint32 {
	length := uint32(len(k))
	a := uint32(0x9e3779b9)
	b := a
	c := uint32(0)
	for len(k) >= 12 {
		a += le32(k[0:])
		b += le32(k[4:])
		c += le32(k[8:])
		a, b, c = jenkins.Mix(a, b, c)
		k = k[12:]
	}
	c += length
	// The last 11 bytes; the low byte of c is reserved for the length.
	switch len(k) {
	case 11:
		c += uint32(k[10]) << 24
		fallthrough
	case 10:
		c += uint32(k[9]) << 16
		fallthrough
	case 9:
		c += uint32(k[8]) << 8
		fallthrough
	case 8:
		b += uint32(k[7]) << 24
		fallthrough
	case 7:
		b += uint32(k[6]) << 16
		fallthrough
	case 6:
		b += uint32(k[5]) << 8
		fallthrough
	case 5:
		b += uint32(k[4])
		fallthrough
	case 4:
		a += uint32(k[3]) << 24
		fallthrough
	case 3:
		a += uint32(k[2]) << 16
		fallthrough
	case 2:
		a += uint32(k[1]) << 8
		fallthrough
	case 1:
		a += uint32(k[0])
	}
	_, _, c = jenkins.Mix(a, b, c)
	return c
}
