package crush

// The CRUSH hash is Robert Jenkins' 96-bit mix applied to 32-bit inputs
// with fixed salt values; these functions must agree with Ceph's bit for
// bit, since every placement is derived from them.

const hashSeed uint32 = 1315423911

// mix is Jenkins' reversible 96-bit mix.
func mix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= b
	a -= c
	a ^= c >> 13
	b -= c
	b -= a
	b ^= a << 8
	c -= a
	c -= b
	c ^= b >> 13
	a -= b
	a -= c
	a ^= c >> 12
	b -= c
	b -= a
	b ^= a << 16
	c -= a
	c -= b
	c ^= b >> 5
	a -= b
	a -= c
	a ^= c >> 3
	b -= c
	b -= a
	b ^= a << 10
	c -= a
	c -= b
	c ^= b >> 15
	return a, b, c
}

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
	_, _, h = mix(a, saltX, h)
	_, _, h = mix(saltY, a, h)
	return h
}

// Hash32_2 is crush_hash32_2.
func Hash32_2(typ int, a, b uint32) uint32 {
	if typ != HashRjenkins1 {
		return 0
	}
	h := hashSeed ^ a ^ b
	x, y := saltX, saltY
	a, b, h = mix(a, b, h)
	x, a, h = mix(x, a, h)
	b, y, h = mix(b, y, h)
	return h
}

// Hash32_3 is crush_hash32_3.
func Hash32_3(typ int, a, b, c uint32) uint32 {
	if typ != HashRjenkins1 {
		return 0
	}
	h := hashSeed ^ a ^ b ^ c
	x, y := saltX, saltY
	a, b, h = mix(a, b, h)
	c, x, h = mix(c, x, h)
	y, a, h = mix(y, a, h)
	b, x, h = mix(b, x, h)
	y, c, h = mix(y, c, h)
	return h
}

// Hash32_4 is crush_hash32_4.
func Hash32_4(typ int, a, b, c, d uint32) uint32 {
	if typ != HashRjenkins1 {
		return 0
	}
	h := hashSeed ^ a ^ b ^ c ^ d
	x, y := saltX, saltY
	a, b, h = mix(a, b, h)
	c, d, h = mix(c, d, h)
	a, x, h = mix(a, x, h)
	y, b, h = mix(y, b, h)
	c, x, h = mix(c, x, h)
	y, d, h = mix(y, d, h)
	return h
}

// Hash32_5 is crush_hash32_5.
func Hash32_5(typ int, a, b, c, d, e uint32) uint32 {
	if typ != HashRjenkins1 {
		return 0
	}
	h := hashSeed ^ a ^ b ^ c ^ d ^ e
	x, y := saltX, saltY
	a, b, h = mix(a, b, h)
	c, d, h = mix(c, d, h)
	e, x, h = mix(e, x, h)
	y, a, h = mix(y, a, h)
	b, x, h = mix(b, x, h)
	y, c, h = mix(y, c, h)
	d, x, h = mix(d, x, h)
	y, e, h = mix(y, e, h)
	return h
}
