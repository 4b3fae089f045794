package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"errors"
	"fmt"
)

// cephxIV is the fixed initialisation vector Ceph uses for every AES-CBC
// operation of cephx.
var cephxIV = [aes.BlockSize]byte{'c', 'e', 'p', 'h', 's', 'a', 'g', 'e', 'y', 'u', 'd', 'a', 'g', 'r', 'e', 'g'}

// errDecrypt is returned when ciphertext does not decrypt to a valid
// padding: almost always a wrong key.
var errDecrypt = errors.New("cannot decrypt (wrong key?)")

// aesCBCEncrypt encrypts plaintext with AES-128-CBC under the fixed IV and
// PKCS#7 padding (always 1..16 bytes), as Ceph's CryptoAES does. key is
// a validated AES key.
func aesCBCEncrypt(key CryptoKey, plaintext []byte) ([]byte, error) {
	block, err := aes.NewCipher(key.secret)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	pad := aes.BlockSize - len(plaintext)%aes.BlockSize
	buf := make([]byte, len(plaintext)+pad)
	copy(buf, plaintext)
	for i := len(plaintext); i < len(buf); i++ {
		buf[i] = byte(pad)
	}
	cipher.NewCBCEncrypter(block, cephxIV[:]).CryptBlocks(buf, buf)
	return buf, nil
}

// aesCBCDecrypt reverses aesCBCEncrypt into fresh memory.
func aesCBCDecrypt(key CryptoKey, ciphertext []byte) ([]byte, error) {
	if len(ciphertext) == 0 || len(ciphertext)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("ciphertext length %d is not a positive multiple of %d", len(ciphertext), aes.BlockSize)
	}
	block, err := aes.NewCipher(key.secret)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	buf := make([]byte, len(ciphertext))
	cipher.NewCBCDecrypter(block, cephxIV[:]).CryptBlocks(buf, ciphertext)
	pad := int(buf[len(buf)-1])
	if pad < 1 || pad > aes.BlockSize {
		return nil, errDecrypt
	}
	want := make([]byte, pad)
	for i := range want {
		want[i] = byte(pad)
	}
	if subtle.ConstantTimeCompare(buf[len(buf)-pad:], want) != 1 {
		return nil, errDecrypt
	}
	return buf[:len(buf)-pad], nil
}
