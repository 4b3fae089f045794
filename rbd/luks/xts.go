package luks

import (
	"crypto/aes"
	"encoding/binary"
	"fmt"

	"golang.org/x/crypto/xts"
)

// sectorCipher is AES-XTS with plain64 tweaks: sector i of a run that
// starts at byte off of an area is en- or decrypted with the tweak
// (off/512 + i*sectorSize/512 + tweak), the 512-byte sector number as
// dm-crypt and librbd count it whatever the encryption sector size.
//
// Where the CPU has AES instructions the blocks go through them eight
// at a time (xts_amd64.s); x/crypto/xts, which calls crypto/aes once per
// 16-byte block, is the path elsewhere and the reference the tests hold
// the fast path to.
type sectorCipher struct {
	sectorSize int
	tweak      uint64
	// the AES-NI path: the data key's and the tweak key's schedules;
	// nil when the CPU lacks the instructions
	keys, tkeys *aesKeys
	slow        *xts.Cipher
}

func newSectorCipher(key []byte, sectorSize int, tweak uint64) (*sectorCipher, error) {
	return newSectorCipherPath(key, sectorSize, tweak, haveAESNI())
}

// newSectorCipherPath is newSectorCipher with the path chosen: fast for
// the AES-NI rounds.
func newSectorCipherPath(key []byte, sectorSize int, tweak uint64, fast bool) (*sectorCipher, error) {
	s := &sectorCipher{sectorSize: sectorSize, tweak: tweak}
	if !fast {
		c, err := xts.NewCipher(aes.NewCipher, key)
		if err != nil {
			return nil, fmt.Errorf("luks: aes-xts with a %d-byte key: %w", len(key), err)
		}
		s.slow = c
		return s, nil
	}
	if n := len(key); n != 32 && n != 48 && n != 64 {
		return nil, fmt.Errorf("luks: aes-xts with a %d-byte key: %w", n, aes.KeySizeError(n))
	}
	half := len(key) / 2
	s.keys, s.tkeys = expandAESKey(key[:half]), expandAESKey(key[half:])
	return s, nil
}

// encrypt encrypts src (whole sectors) into dst, src starting at byte off
// of the area (a multiple of the sector size).
func (s *sectorCipher) encrypt(dst, src []byte, off int64) { s.sectors(dst, src, off, false) }

// decrypt is encrypt's inverse.
func (s *sectorCipher) decrypt(dst, src []byte, off int64) { s.sectors(dst, src, off, true) }

// sectors runs each sector of src through the cipher in the direction
// dec says, on the path newSectorCipherPath chose.
func (s *sectorCipher) sectors(dst, src []byte, off int64, dec bool) {
	for i := 0; i < len(src); i += s.sectorSize {
		d, p := dst[i:i+s.sectorSize], src[i:i+s.sectorSize]
		sector := uint64(off+int64(i))/512 + s.tweak
		switch {
		case s.slow == nil:
			s.sector(d, p, sector, dec)
		case dec:
			s.slow.Decrypt(d, p, sector)
		default:
			s.slow.Encrypt(d, p, sector)
		}
	}
}

// tweakBlocks is how many blocks' tweaks sector computes for one call
// into the assembly: 512 bytes of stack.
const tweakBlocks = 32

// sector runs XTS over one sector on the AES-NI path (IEEE 1619): the
// tweak of the first block is the sector number, little-endian,
// encrypted with the tweak key; each next block's is the one before
// multiplied by x in GF(2^128) (a one-bit shift of the little-endian
// 128-bit number, 0x87 folded into the low byte on a carry).
func (s *sectorCipher) sector(dst, src []byte, sector uint64, dec bool) {
	if len(src)%16 != 0 || len(dst) < len(src) {
		panic("luks: xts sector not a whole number of blocks")
	}
	// the tweak key's cipher is one block through the same rounds with
	// a zero tweak
	var t, zero [16]byte
	binary.LittleEndian.PutUint64(t[:8], sector)
	xtsEncryptBlocks(s.tkeys.rounds, &s.tkeys.enc[0], &t[0], &t[0], &zero[0], 1)
	lo, hi := binary.LittleEndian.Uint64(t[:8]), binary.LittleEndian.Uint64(t[8:])
	var tw [tweakBlocks * 16]byte
	for off := 0; off < len(src); {
		n := min(tweakBlocks, (len(src)-off)/16)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint64(tw[16*i:], lo)
			binary.LittleEndian.PutUint64(tw[16*i+8:], hi)
			carry := hi >> 63
			hi = hi<<1 | lo>>63
			lo = lo<<1 ^ 0x87*carry
		}
		if dec {
			xtsDecryptBlocks(s.keys.rounds, &s.keys.dec[0], &dst[off], &src[off], &tw[0], n)
		} else {
			xtsEncryptBlocks(s.keys.rounds, &s.keys.enc[0], &dst[off], &src[off], &tw[0], n)
		}
		off += 16 * n
	}
}
