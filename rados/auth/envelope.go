package auth

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// cephxMagic starts every plaintext cephx encrypts, after a struct_v byte;
// finding it after decryption proves the key was right.
const cephxMagic uint64 = 0xff009cad8826aa55

// seal encrypts the encoding produced by body under key, prefixed by the
// cephx header (struct_v 1, magic), and returns the bare ciphertext
// (Ceph's encode_encrypt_enc_bl). usage is the cephx key usage of the
// place the envelope is used (it matters to aes256k keys only).
func seal(key CryptoKey, usage uint32, body func(e *denc.Encoder)) ([]byte, error) {
	e := denc.NewEncoder(make([]byte, 0, 64))
	e.U8(1)
	e.U64(cephxMagic)
	body(e)
	return key.encrypt(usage, e.Bytes())
}

// sealBlob is seal with a u32 length prefix (Ceph's encode_encrypt), the
// form most cephx fields use.
func sealBlob(key CryptoKey, usage uint32, body func(e *denc.Encoder)) ([]byte, error) {
	ct, err := seal(key, usage, body)
	if err != nil {
		return nil, err
	}
	e := denc.NewEncoder(make([]byte, 0, 4+len(ct)))
	e.Blob(ct)
	return e.Bytes(), nil
}

// open decrypts bare ciphertext and checks the cephx header; it returns a
// decoder over the plaintext that follows the header.
func open(key CryptoKey, usage uint32, ciphertext []byte) (*denc.Decoder, error) {
	pt, err := key.decrypt(usage, ciphertext)
	if err != nil {
		return nil, err
	}
	d := denc.NewDecoder(pt)
	d.U8("cephx encryption header version")
	magic := d.U64("cephx encryption magic")
	if d.Err() != nil || magic != cephxMagic {
		return nil, errDecrypt
	}
	return d, nil
}

// openBlob reads a u32-length-prefixed ciphertext from d and opens it.
func openBlob(key CryptoKey, usage uint32, d *denc.Decoder, what string) (*denc.Decoder, error) {
	ct := d.Blob(what)
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return open(key, usage, ct)
}
