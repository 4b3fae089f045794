package crush

// crushLn returns 2^44*log2(x+1) in CRUSH's fixed point, for x in
// [0, 0xffff], computed from the lookup tables exactly as Ceph does.
func crushLn(xin uint32) uint64 {
	x := xin + 1

	// Normalize so that bit 15 or 16 is set.
	iexpon := 15
	for x&0x18000 == 0 {
		x <<= 1
		iexpon--
	}

	index1 := (x >> 8) << 1
	rh := rhLH[index1-256]   // ~ 2^56/index1
	lh := rhLH[index1+1-256] // ~ 2^48*log2(index1/256)

	xl64 := uint64(x) * rh
	xl64 >>= 48

	result := uint64(iexpon) << (12 + 32)

	index2 := xl64 & 0xff
	ll := llTable[index2] // ~ 2^48*log2(1+index2/2^15)

	lh += ll
	lh >>= 48 - 12 - 32
	return result + lh
}
