package luks

import "encoding/binary"

// aesKeys is an expanded AES key in the layout of the AES-NI
// instructions: round key r is bytes 16r to 16r+16, the key schedule's
// words in order, each big-endian. enc drives AESENC; dec is the
// equivalent inverse cipher's schedule (the encryption round keys in
// reverse order, the middle ones through InvMixColumns) that drives
// AESDEC.
type aesKeys struct {
	rounds int // 10 for a 16-byte key, 12 for 24, 14 for 32
	enc    [15 * 16]byte
	dec    [15 * 16]byte
}

// expandAESKey expands a 16-, 24- or 32-byte AES key (FIPS-197 §5.2).
func expandAESKey(key []byte) *aesKeys {
	nk := len(key) / 4
	k := &aesKeys{rounds: nk + 6}
	n := 4 * (k.rounds + 1)
	var w [60]uint32
	for i := 0; i < nk; i++ {
		w[i] = binary.BigEndian.Uint32(key[4*i:])
	}
	var sbox [256]byte
	fillSbox(&sbox)
	sub := func(x uint32) uint32 {
		return uint32(sbox[x>>24])<<24 | uint32(sbox[x>>16&0xff])<<16 | uint32(sbox[x>>8&0xff])<<8 | uint32(sbox[x&0xff])
	}
	rcon := byte(1)
	for i := nk; i < n; i++ {
		t := w[i-1]
		switch {
		case i%nk == 0:
			t = sub(t<<8|t>>24) ^ uint32(rcon)<<24
			rcon = gfMul(rcon, 2)
		case nk > 6 && i%nk == 4:
			t = sub(t)
		}
		w[i] = w[i-nk] ^ t
	}
	for i := 0; i < n; i++ {
		binary.BigEndian.PutUint32(k.enc[4*i:], w[i])
	}
	last := 16 * k.rounds
	copy(k.dec[0:16], k.enc[last:last+16])
	for r := 1; r < k.rounds; r++ {
		invMixColumns(k.dec[16*r:16*r+16], k.enc[last-16*r:last-16*r+16])
	}
	copy(k.dec[last:last+16], k.enc[0:16])
	return k
}

// gfMul multiplies in AES's field GF(2^8) modulo x^8+x^4+x^3+x+1.
func gfMul(a, b byte) byte {
	var p byte
	for b != 0 {
		if b&1 != 0 {
			p ^= a
		}
		hi := a & 0x80
		a <<= 1
		if hi != 0 {
			a ^= 0x1b
		}
		b >>= 1
	}
	return p
}

// fillSbox computes AES's S-box: the multiplicative inverse in GF(2^8)
// (0 for 0) through the affine transformation of FIPS-197 §5.1.1.
func fillSbox(s *[256]byte) {
	for x := 0; x < 256; x++ {
		inv := byte(0)
		if x != 0 {
			// x^254 is x's inverse: the field's multiplicative group
			// has order 255
			inv = 1
			base, e := byte(x), 254
			for e > 0 {
				if e&1 != 0 {
					inv = gfMul(inv, base)
				}
				base = gfMul(base, base)
				e >>= 1
			}
		}
		b := inv
		s[x] = b ^ rotl8(b, 1) ^ rotl8(b, 2) ^ rotl8(b, 3) ^ rotl8(b, 4) ^ 0x63
	}
}

func rotl8(b byte, n uint) byte { return b<<n | b>>(8-n) }

// invMixColumns applies AES's InvMixColumns to the 16-byte state src
// (four columns of four bytes) into dst.
func invMixColumns(dst, src []byte) {
	for c := 0; c < 4; c++ {
		a0, a1, a2, a3 := src[4*c], src[4*c+1], src[4*c+2], src[4*c+3]
		dst[4*c] = gfMul(a0, 14) ^ gfMul(a1, 11) ^ gfMul(a2, 13) ^ gfMul(a3, 9)
		dst[4*c+1] = gfMul(a0, 9) ^ gfMul(a1, 14) ^ gfMul(a2, 11) ^ gfMul(a3, 13)
		dst[4*c+2] = gfMul(a0, 13) ^ gfMul(a1, 9) ^ gfMul(a2, 14) ^ gfMul(a3, 11)
		dst[4*c+3] = gfMul(a0, 11) ^ gfMul(a1, 13) ^ gfMul(a2, 9) ^ gfMul(a3, 14)
	}
}
