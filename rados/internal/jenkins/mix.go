// Package jenkins holds Bob Jenkins' 96-bit mix (lookup2), the core of
// both Ceph hashes purerbd must reproduce bit for bit: the CRUSH hash
// (crush_hash32*) and the object-name hash (ceph_str_hash_rjenkins).
package jenkins

// Mix is Jenkins' reversible 96-bit mix of three 32-bit words.
func Mix(a, b, c uint32) (uint32, uint32, uint32) {
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
