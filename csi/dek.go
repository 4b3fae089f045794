package csi

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/crypto/scrypt"
)

// A volume's data encryption key (DEK) under ceph-csi's "metadata" KMS:
// a random passphrase for the volume's LUKS keyslot, kept in the image's
// metadata (metaDEK) sealed with a key derived from the KMS passphrase
// (a Kubernetes Secret's encryptionPassphrase) and the volume's ID, so
// that a copy of the metadata on another volume opens nothing. The
// format is ceph-csi's, so each reads the other's volumes:
//
//	{"dek": base64(AES-256-GCM(key, nonce, passphrase)), "nonce": base64(12 bytes)}
//	key = scrypt(KMS passphrase, salt = volume ID, N=32768, r=8, p=1, 32 bytes)
const (
	metaDEK    = "rbd.csi.ceph.com/dek"
	metaDEKOld = ".rbd.csi.ceph.com/dek"
	// dekRandomBytes is the entropy of a new DEK (ceph-csi's
	// encryptionPassphraseSize), written as URL-safe base64.
	dekRandomBytes = 20
	// sealedDEKMax bounds what is parsed: a sealed DEK is about 100
	// bytes of JSON.
	sealedDEKMax = 4096
)

// errWrongKMSPassphrase is a sealed DEK that the KMS passphrase (with
// this volume ID) does not open.
var errWrongKMSPassphrase = errors.New("the KMS passphrase does not open the volume's key")

// sealedDEK is the JSON in metaDEK; []byte fields are standard base64,
// as encoding/json writes them in ceph-csi too.
type sealedDEK struct {
	DEK   []byte `json:"dek"`
	Nonce []byte `json:"nonce"`
}

// newDEK makes a random DEK.
func newDEK() (string, error) {
	b := make([]byte, dekRandomBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random DEK: %w", err)
	}
	return base64.URLEncoding.EncodeToString(b), nil
}

// dekCipher is the AEAD sealing the DEKs of volumeID.
func dekCipher(kmsPassphrase []byte, volumeID string) (cipher.AEAD, error) {
	key, err := scrypt.Key(kmsPassphrase, []byte(volumeID), 32768, 8, 1, 32)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// sealDEK seals dek for volumeID.
func sealDEK(kmsPassphrase []byte, volumeID, dek string) (string, error) {
	aead, err := dekCipher(kmsPassphrase, volumeID)
	if err != nil {
		return "", err
	}
	s := sealedDEK{Nonce: make([]byte, aead.NonceSize())}
	if _, err := rand.Read(s.Nonce); err != nil {
		return "", fmt.Errorf("random nonce: %w", err)
	}
	s.DEK = aead.Seal(nil, s.Nonce, []byte(dek), nil)
	b, err := json.Marshal(s)
	return string(b), err
}

// parseSealedDEK decodes metaDEK's value.
func parseSealedDEK(v string) (sealedDEK, error) {
	var s sealedDEK
	if len(v) > sealedDEKMax {
		return s, fmt.Errorf("sealed key of %d bytes (at most %d)", len(v), sealedDEKMax)
	}
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return s, fmt.Errorf("sealed key: %w", err)
	}
	if len(s.DEK) == 0 || len(s.Nonce) != 12 {
		return s, fmt.Errorf("sealed key: %d key bytes and a %d-byte nonce (want a 12-byte nonce)", len(s.DEK), len(s.Nonce))
	}
	return s, nil
}

// openDEK opens the sealed DEK of volumeID.
func openDEK(kmsPassphrase []byte, volumeID, sealed string) (string, error) {
	s, err := parseSealedDEK(sealed)
	if err != nil {
		return "", err
	}
	aead, err := dekCipher(kmsPassphrase, volumeID)
	if err != nil {
		return "", err
	}
	dek, err := aead.Open(nil, s.Nonce, s.DEK, nil)
	if err != nil {
		return "", errWrongKMSPassphrase
	}
	return string(dek), nil
}
