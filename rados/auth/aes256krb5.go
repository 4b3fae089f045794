package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"fmt"
)

// Ceph's aes256k key type (CEPH_CRYPTO_AES256KRB5) is the Kerberos
// enctype aes256-cts-hmac-sha384-192 of RFC 8009, keyed per cephx key
// usage:
//
//	Ke = KDF(secret, usage|0xAA, 256 bits), Ki = KDF(secret, usage|0x55, 192 bits)
//	KDF(K, label, k) = HMAC-SHA384(K, 00000001 | label | 00 | BE32(k))[:k/8]
//	encrypt(P) = C | H, C = AES-256-CBC-CS3(Ke, IV 0, confounder | P),
//	             H = HMAC-SHA384(Ki, IV 0 | C)[:24]
//
// The confounder is 16 random bytes, so the ciphertext is 40 bytes longer
// than the plaintext and differs on every call.
const (
	aes256kKeyLen = 32
	aes256kMACLen = 24
	// aes256kOverhead is what encryption adds: confounder and MAC.
	aes256kOverhead = aes.BlockSize + aes256kMACLen
)

// Cephx key usages: an aes256k key derives distinct encryption and
// integrity keys for each place cephx uses it (CephxProtocol.h). AES keys
// ignore the usage.
const (
	usageAuthConnectionSecret uint32 = 0x03 // mon's connection secret, AUTH session key
	usageTicketSessionKey     uint32 = 0x04 // CephXServiceTicket ("blob for me")
	usageTicketBlob           uint32 = 0x05 // ticket blob re-sealed with the old session key
	usageAuthorize            uint32 = 0x10 // CephXAuthorize, service session key
	usageAuthorizeChallenge   uint32 = 0x11 // service's CephXAuthorizeChallenge
	usageAuthorizeReply       uint32 = 0x12 // service's CephXAuthorizeReply
	usageTicketInfo           uint32 = 0x30 // CephXServiceTicketInfo, service secret
)

// aes256kDerive computes the usage key of the given type byte (0xAA for
// encryption, 0x55 for integrity) and length in bytes.
func aes256kDerive(secret []byte, usage uint32, typ byte, n int) []byte {
	var in [14]byte
	binary.BigEndian.PutUint32(in[0:], 1)
	binary.BigEndian.PutUint32(in[4:], usage)
	in[8] = typ
	in[9] = 0
	binary.BigEndian.PutUint32(in[10:], uint32(n*8))
	m := hmac.New(sha512.New384, secret)
	m.Write(in[:])
	return m.Sum(nil)[:n]
}

// aes256kMAC is the truncated HMAC-SHA384 over the zero IV and ciphertext.
func aes256kMAC(ki, ciphertext []byte) []byte {
	m := hmac.New(sha512.New384, ki)
	var iv [aes.BlockSize]byte
	m.Write(iv[:])
	m.Write(ciphertext)
	return m.Sum(nil)[:aes256kMACLen]
}

// aes256kEncrypt encrypts plaintext under key for usage with a fresh
// random confounder.
func aes256kEncrypt(key CryptoKey, usage uint32, plaintext []byte) ([]byte, error) {
	var conf [aes.BlockSize]byte
	if _, err := rand.Read(conf[:]); err != nil {
		return nil, fmt.Errorf("auth: random confounder: %w", err)
	}
	return aes256kEncryptWith(key, usage, conf[:], plaintext)
}

// aes256kEncryptWith encrypts with the given confounder (tests pin it to
// reproduce known answers).
func aes256kEncryptWith(key CryptoKey, usage uint32, confounder, plaintext []byte) ([]byte, error) {
	block, err := aes.NewCipher(aes256kDerive(key.secret, usage, 0xAA, 32))
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	out := make([]byte, 0, len(confounder)+len(plaintext)+aes256kMACLen)
	out = append(append(out, confounder...), plaintext...)
	ctsEncrypt(block, out)
	return append(out, aes256kMAC(aes256kDerive(key.secret, usage, 0x55, aes256kMACLen), out)...), nil
}

// aes256kDecrypt checks the MAC, decrypts and drops the confounder.
func aes256kDecrypt(key CryptoKey, usage uint32, in []byte) ([]byte, error) {
	if len(in) < aes256kOverhead {
		return nil, fmt.Errorf("ciphertext length %d is shorter than %d", len(in), aes256kOverhead)
	}
	ct, mac := in[:len(in)-aes256kMACLen], in[len(in)-aes256kMACLen:]
	if !hmac.Equal(mac, aes256kMAC(aes256kDerive(key.secret, usage, 0x55, aes256kMACLen), ct)) {
		return nil, errDecrypt
	}
	block, err := aes.NewCipher(aes256kDerive(key.secret, usage, 0xAA, 32))
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	buf := append([]byte(nil), ct...)
	ctsDecrypt(block, buf)
	return buf[aes.BlockSize:], nil
}

// ctsEncrypt encrypts buf (at least one block) in place with AES-CBC under
// a zero IV and ciphertext stealing in the Kerberos variant (CS3): the
// last two blocks are always swapped and the final one truncated to the
// input's length.
func ctsEncrypt(block cipher.Block, buf []byte) {
	n := len(buf)
	m := (n + aes.BlockSize - 1) / aes.BlockSize
	padded := make([]byte, m*aes.BlockSize)
	copy(padded, buf)
	var iv [aes.BlockSize]byte
	cipher.NewCBCEncrypter(block, iv[:]).CryptBlocks(padded, padded)
	if m == 1 {
		copy(buf, padded)
		return
	}
	r := n - (m-1)*aes.BlockSize
	last, prev := padded[(m-1)*aes.BlockSize:], padded[(m-2)*aes.BlockSize:(m-1)*aes.BlockSize]
	copy(buf, padded[:(m-2)*aes.BlockSize])
	copy(buf[(m-2)*aes.BlockSize:], last)
	copy(buf[(m-1)*aes.BlockSize:], prev[:r])
}

// ctsDecrypt reverses ctsEncrypt in place.
func ctsDecrypt(block cipher.Block, buf []byte) {
	n := len(buf)
	m := (n + aes.BlockSize - 1) / aes.BlockSize
	var iv [aes.BlockSize]byte
	if m == 1 {
		cipher.NewCBCDecrypter(block, iv[:]).CryptBlocks(buf, buf)
		return
	}
	r := n - (m-1)*aes.BlockSize
	head := (m - 2) * aes.BlockSize
	// The stolen block holds the CBC output of the last (padded) block;
	// decrypting it raw gives that block XOR the previous ciphertext, whose
	// tail the padding zeros leave exposed.
	var d [aes.BlockSize]byte
	block.Decrypt(d[:], buf[head:head+aes.BlockSize])
	var prevCT [aes.BlockSize]byte
	copy(prevCT[:], buf[head+aes.BlockSize:])
	copy(prevCT[r:], d[r:])
	var lastPT [aes.BlockSize]byte
	for i := 0; i < r; i++ {
		lastPT[i] = d[i] ^ prevCT[i]
	}
	// Chain as plain CBC: blocks 1..m-2, then the reconstructed block m-1.
	chain := iv[:]
	if head > 0 {
		chain = append([]byte(nil), buf[head-aes.BlockSize:head]...)
		cipher.NewCBCDecrypter(block, iv[:]).CryptBlocks(buf[:head], buf[:head])
	}
	var p [aes.BlockSize]byte
	block.Decrypt(p[:], prevCT[:])
	for i := range p {
		p[i] ^= chain[i]
	}
	copy(buf[head:], p[:])
	copy(buf[head+aes.BlockSize:], lastPT[:r])
}

// hmacSHA256 is Ceph's CryptoKey::hmac_sha256: HMAC-SHA256 keyed with the
// raw secret.
func hmacSHA256(key CryptoKey, data []byte) []byte {
	m := hmac.New(sha256.New, key.secret)
	m.Write(data)
	return m.Sum(nil)
}
