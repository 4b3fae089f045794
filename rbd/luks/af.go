package luks

import (
	"encoding/binary"
	"hash"
)

// afStripes is the number of stripes LUKS splits a key into
// (cryptsetup's and librbd's only value).
const afStripes = 4000

// The anti-forensic splitter of LUKS: a key of n bytes is stored as
// stripes*n bytes, all but the last random, the last the key XORed with
// the running diffusion of the others, so that losing any part of the
// stored material loses the key.

// diffuse replaces d with its diffusion under h: each hash-sized block i
// becomes the first len(block) bytes of H(be32(i) || block).
func diffuse(h func() hash.Hash, d []byte) {
	hh := h()
	size := hh.Size()
	var iv [4]byte
	var sum []byte
	for i, off := 0, 0; off < len(d); i, off = i+1, off+size {
		end := min(off+size, len(d))
		hh.Reset()
		binary.BigEndian.PutUint32(iv[:], uint32(i))
		hh.Write(iv[:])
		hh.Write(d[off:end])
		sum = hh.Sum(sum[:0])
		copy(d[off:end], sum)
	}
}

// afMerge recovers the n-byte key from split (stripes*n bytes).
func afMerge(h func() hash.Hash, split []byte, n, stripes int) []byte {
	d := make([]byte, n)
	for i := 0; i < stripes-1; i++ {
		xorInto(d, split[i*n:(i+1)*n])
		diffuse(h, d)
	}
	xorInto(d, split[(stripes-1)*n:stripes*n])
	return d
}

// afSplit fills split (stripes*n bytes) for key, taking the random
// stripes from random (all but the last stripe's bytes are read).
func afSplit(h func() hash.Hash, key, split []byte, stripes int, random []byte) {
	n := len(key)
	d := make([]byte, n)
	copy(split[:(stripes-1)*n], random)
	for i := 0; i < stripes-1; i++ {
		xorInto(d, split[i*n:(i+1)*n])
		diffuse(h, d)
	}
	last := split[(stripes-1)*n : stripes*n]
	for i := range last {
		last[i] = d[i] ^ key[i]
	}
}

func xorInto(dst, src []byte) {
	for i := range dst {
		dst[i] ^= src[i]
	}
}
