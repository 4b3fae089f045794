package msgr

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
)

// Secure-mode key material carved from the connection secret.
const (
	gcmKeyLen   = 16
	gcmNonceLen = 12 // le32 fixed part + le64 counter
	// connSecretMinLen is key + rx nonce + tx nonce.
	connSecretMinLen = gcmKeyLen + 2*gcmNonceLen
)

// gcmState is one direction of a secure-mode stream: AES-128-GCM with a
// nonce whose 64-bit counter advances after every seal or open.
type gcmState struct {
	aead  cipher.AEAD
	nonce [gcmNonceLen]byte
}

// newGCMPair derives the receive and transmit states of the connecting
// side from the connection secret: key, then rx nonce, then tx nonce.
func newGCMPair(secret []byte) (rx, tx *gcmState, err error) {
	if len(secret) < connSecretMinLen {
		return nil, nil, fmt.Errorf("%w: connection secret of %d bytes, secure mode needs %d", ErrProtocol, len(secret), connSecretMinLen)
	}
	block, err := aes.NewCipher(secret[:gcmKeyLen])
	if err != nil {
		return nil, nil, fmt.Errorf("msgr: %w", err)
	}
	mk := func(nonce []byte) (*gcmState, error) {
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("msgr: %w", err)
		}
		s := &gcmState{aead: aead}
		copy(s.nonce[:], nonce)
		return s, nil
	}
	if rx, err = mk(secret[gcmKeyLen : gcmKeyLen+gcmNonceLen]); err != nil {
		return nil, nil, err
	}
	if tx, err = mk(secret[gcmKeyLen+gcmNonceLen : connSecretMinLen]); err != nil {
		return nil, nil, err
	}
	return rx, tx, nil
}

func (s *gcmState) advance() {
	binary.LittleEndian.PutUint64(s.nonce[4:], binary.LittleEndian.Uint64(s.nonce[4:])+1)
}

// seal encrypts p in place (p must have gcmTagLen spare capacity) and
// returns ciphertext plus tag.
func (s *gcmState) seal(p []byte) []byte {
	out := s.aead.Seal(p[:0], s.nonce[:], p, nil)
	s.advance()
	return out
}

// open authenticates and decrypts ciphertext-plus-tag in place.
func (s *gcmState) open(p []byte) ([]byte, error) {
	out, err := s.aead.Open(p[:0], s.nonce[:], p, nil)
	s.advance()
	if err != nil {
		return nil, fmt.Errorf("%w: secure frame failed authentication", ErrProtocol)
	}
	return out, nil
}
