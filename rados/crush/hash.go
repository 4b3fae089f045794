package crush

import "github.com/purerbd/purerbd/rados/internal/jenkins"

// The CRUSH hash is Robert Jenkins' 96-bit mix applied to 32-bit inputs
// with fixed salt values; these functions must agree with Ceph's bit for
// bit, since every placement is derived from them.

const hashSeed uint32 = 1315423911

const (
	saltX uint32 = 231232
	saltY uint32 = 1232
)

// Hash32 is crush_hash32 for the rjenkins1 hash; other hash types give 0.
func Hash32(typ int, a uint32) uint32 {
	if typ != HashRjenkins1 {
		return 0
	}
	h := hashSeed ^ a
	_, _, h = jenkins.Mix(a, saltX, h)
	_, _, h = jenkins.Mix(saltY, a, h)
	return h
}

// Hash32_2 is crush_hash32_2.
func Hash32_2(typ int, a, b uint32) uint32 {
	if typ != HashRjenkins1 {
		return 0
	}
	h := hashSeed ^ a ^ b
	x, y := saltX, saltY
	a, b, h = jenkins.Mix(a, b, h)
	_, _, h = jenkins.Mix(x, a, h)
	_, _, h = jenkins.Mix(b, y, h)
	return h
}

// Hash32_3 is crush_hash32_3.
func Hash32_3(typ int, a, b, c uint32) uint32 {
	if typ != HashRjenkins1 {
		return 0
	}
	h := hashSeed ^ a ^ b ^ c
	x, y := saltX, saltY
	a, b, h = jenkins.Mix(a, b, h)
	c, x, h = jenkins.Mix(c, x, h)
	y, _, h = jenkins.Mix(y, a, h)
	_, _, h = jenkins.Mix(b, x, h)
	_, _, h = jenkins.Mix(y, c, h)
	return h
}

// Hash32_4 is crush_hash32_4.
func Hash32_4(typ int, a, b, c, d uint32) uint32 {
	if typ != HashRjenkins1 {
		return 0
	}
	h := hashSeed ^ a ^ b ^ c ^ d
	x, y := saltX, saltY
	a, b, h = jenkins.Mix(a, b, h)
	c, d, h = jenkins.Mix(c, d, h)
	_, x, h = jenkins.Mix(a, x, h)
	y, _, h = jenkins.Mix(y, b, h)
	_, _, h = jenkins.Mix(c, x, h)
	_, _, h = jenkins.Mix(y, d, h)
	return h
}

// Hash32_5 is crush_hash32_5.
func Hash32_5(typ int, a, b, c, d, e uint32) uint32 {
	if typ != HashRjenkins1 {
		return 0
	}
	h := hashSeed ^ a ^ b ^ c ^ d ^ e
	x, y := saltX, saltY
	a, b, h = jenkins.Mix(a, b, h)
	c, d, h = jenkins.Mix(c, d, h)
	e, x, h = jenkins.Mix(e, x, h)
	y, _, h = jenkins.Mix(y, a, h)
	_, x, h = jenkins.Mix(b, x, h)
	y, _, h = jenkins.Mix(y, c, h)
	_, _, h = jenkins.Mix(d, x, h)
	_, _, h = jenkins.Mix(y, e, h)
	return h
}
