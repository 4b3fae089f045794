package luks

import (
	"crypto/aes"
	"fmt"

	"golang.org/x/crypto/xts"
)

// sectorCipher is AES-XTS with plain64 tweaks: sector i of a run that
// starts at byte off of an area is en- or decrypted with the tweak
// (off/512 + i*sectorSize/512 + tweak), the 512-byte sector number as
// dm-crypt and librbd count it whatever the encryption sector size.
type sectorCipher struct {
	c          *xts.Cipher
	sectorSize int
	tweak      uint64
}

func newSectorCipher(key []byte, sectorSize int, tweak uint64) (*sectorCipher, error) {
	c, err := xts.NewCipher(aes.NewCipher, key)
	if err != nil {
		return nil, fmt.Errorf("luks: aes-xts with a %d-byte key: %w", len(key), err)
	}
	return &sectorCipher{c: c, sectorSize: sectorSize, tweak: tweak}, nil
}

// encrypt encrypts src (whole sectors) into dst, src starting at byte off
// of the area (a multiple of the sector size).
func (s *sectorCipher) encrypt(dst, src []byte, off int64) {
	for i := 0; i < len(src); i += s.sectorSize {
		s.c.Encrypt(dst[i:i+s.sectorSize], src[i:i+s.sectorSize], uint64(off+int64(i))/512+s.tweak)
	}
}

// decrypt is encrypt's inverse.
func (s *sectorCipher) decrypt(dst, src []byte, off int64) {
	for i := 0; i < len(src); i += s.sectorSize {
		s.c.Decrypt(dst[i:i+s.sectorSize], src[i:i+s.sectorSize], uint64(off+int64(i))/512+s.tweak)
	}
}
