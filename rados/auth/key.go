package auth

import (
	"crypto/aes"
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"github.com/purerbd/purerbd/rados/denc"
)

// Key types (CEPH_CRYPTO_*).
const (
	KeyTypeNone uint16 = 0
	KeyTypeAES  uint16 = 1 // AES-128, the only type Ceph before Tentacle uses
	// KeyTypeAES256K is aes256k (CEPH_CRYPTO_AES256KRB5): a 32-byte secret
	// used with RFC 8009's aes256-cts-hmac-sha384-192, Tentacle's default.
	KeyTypeAES256K uint16 = 2
)

// CryptoKey is Ceph's CryptoKey: a typed secret with its creation time.
// It formats itself redacted, so it is safe to log by accident; use Secret
// to reach the bytes.
type CryptoKey struct {
	Type    uint16
	Created denc.UTime
	secret  []byte
}

// NewCryptoKey returns a key of the given type holding a copy of secret.
func NewCryptoKey(typ uint16, created denc.UTime, secret []byte) CryptoKey {
	return CryptoKey{Type: typ, Created: created, secret: append([]byte(nil), secret...)}
}

// Secret returns the key's secret bytes. Callers must not modify them.
func (k CryptoKey) Secret() []byte { return k.secret }

// IsZero reports whether k holds no secret.
func (k CryptoKey) IsZero() bool { return len(k.secret) == 0 }

// String describes the key without revealing it.
func (k CryptoKey) String() string {
	return fmt.Sprintf("CryptoKey{type %d, %d-byte secret, redacted}", k.Type, len(k.secret))
}

// GoString is String, so %#v does not reveal the secret either.
func (k CryptoKey) GoString() string { return k.String() }

// Decode reads a CryptoKey: u16 type, utime_t created, u16 length, secret.
func (k *CryptoKey) Decode(d *denc.Decoder) {
	k.Type = d.U16("CryptoKey type")
	k.Created.Decode(d)
	n := d.U16("CryptoKey length")
	k.secret = nil
	if s := d.Raw("CryptoKey secret", int(n)); s != nil {
		k.secret = append([]byte(nil), s...)
	}
}

// Encode writes a CryptoKey.
func (k CryptoKey) Encode(e *denc.Encoder) {
	e.U16(k.Type)
	k.Created.Encode(e)
	e.U16(uint16(len(k.secret)))
	e.Raw(k.secret)
}

// validate checks that k can be used for cephx encryption.
func (k CryptoKey) validate() error {
	switch k.Type {
	case KeyTypeAES:
		if len(k.secret) != aes.BlockSize {
			return fmt.Errorf("auth: AES key has %d bytes, want %d", len(k.secret), aes.BlockSize)
		}
		return nil
	case KeyTypeAES256K:
		if len(k.secret) != aes256kKeyLen {
			return fmt.Errorf("auth: aes256k key has %d bytes, want %d", len(k.secret), aes256kKeyLen)
		}
		return nil
	case KeyTypeNone:
		return fmt.Errorf("auth: key of type none cannot be used for cephx")
	}
	return fmt.Errorf("auth: unsupported key type %d", k.Type)
}

// ParseKey decodes a key as Ceph prints it: the base64 of an encoded
// CryptoKey (what "ceph auth get-key" and keyring files hold). The key
// must be of a type cephx can use (AES or aes256k).
func ParseKey(b64 string) (CryptoKey, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		// Never include the input: it is a secret.
		return CryptoKey{}, fmt.Errorf("auth: key is not valid base64")
	}
	var k CryptoKey
	d := denc.NewDecoder(raw)
	k.Decode(d)
	d.End("CryptoKey")
	if err := d.Err(); err != nil {
		return CryptoKey{}, fmt.Errorf("auth: key is not an encoded CryptoKey (%d bytes)", len(raw))
	}
	if err := k.validate(); err != nil {
		return CryptoKey{}, err
	}
	return k, nil
}

// ReadKeyFile reads a file holding just a base64 key (Ceph's "keyfile"
// option, or the output of "ceph auth get-key").
func ReadKeyFile(path string) (CryptoKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return CryptoKey{}, fmt.Errorf("auth: reading key file: %w", err)
	}
	k, err := ParseKey(string(b))
	if err != nil {
		return CryptoKey{}, fmt.Errorf("auth: key file %s: %w", path, err)
	}
	return k, nil
}

// encrypt encrypts plaintext under k for the given cephx key usage.
func (k CryptoKey) encrypt(usage uint32, plaintext []byte) ([]byte, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	if k.Type == KeyTypeAES256K {
		return aes256kEncrypt(k, usage, plaintext)
	}
	return aesCBCEncrypt(k, plaintext)
}

// decrypt reverses encrypt into fresh memory.
func (k CryptoKey) decrypt(usage uint32, ciphertext []byte) ([]byte, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	if k.Type == KeyTypeAES256K {
		return aes256kDecrypt(k, usage, ciphertext)
	}
	return aesCBCDecrypt(k, ciphertext)
}
