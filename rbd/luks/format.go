package luks

import (
	"crypto/rand"
	"fmt"
	"io"
)

// FormatOptions shape a new header. The zero value (plus Version) is
// what `rbd encryption format` writes: AES-256-XTS, one keyslot, data
// aligned to Alignment.
type FormatOptions struct {
	// Version is 1 or 2.
	Version int
	// KeySize is the volume key length: 64 (AES-256-XTS, the default, as
	// rbd's --cipher-alg aes-256) or 32 (AES-128-XTS, aes-128).
	KeySize int
	// Alignment is the data offset's alignment in bytes; librbd passes
	// the image's object size (so the data offset is a whole number of
	// stripe periods). Zero means 1 MiB.
	Alignment int64
	// KDF sets the keyslot's KDF and its cost; the salt is always fresh.
	// Zero means DefaultKDF(Version).
	KDF KDF
	// DigestIterations is the PBKDF2 cost of the volume key digest;
	// zero means 100000.
	DigestIterations int
	// Rand is the source of keys, salts and the AF stripes; nil means
	// crypto/rand.
	Rand io.Reader
}

// DefaultKDF is the keyslot KDF Format uses without one: Argon2id for
// LUKS2 and PBKDF2-SHA256 for LUKS1, at fixed costs near what
// cryptsetup's benchmark picks on a small machine (cryptsetup times its
// KDF to about two seconds; a fixed cost keeps formatting predictable).
func DefaultKDF(version int) KDF {
	if version == 1 {
		return KDF{Type: "pbkdf2", Hash: "sha256", Iterations: 1000000}
	}
	return KDF{Type: "argon2id", Time: 4, Memory: 256 << 10, CPUs: 2}
}

// Format layouts in cryptsetup's (and so librbd's) shape.
const (
	// luks2HeaderCopy is each LUKS2 header copy's size (cryptsetup's
	// default metadata size).
	luks2HeaderCopy = 16 << 10
	// luks2MetadataArea is the space cryptsetup reserves for both LUKS2
	// header copies and the keyslots by default, before alignment.
	luks2MetadataArea = 16 << 20
	// luks1FirstSlot is where LUKS1 keyslot material starts: the header
	// rounded up to 4 KiB.
	luks1FirstSlot = 4096
	saltLen        = 32
)

// Format makes a new volume key and a header with one keyslot (slot 0)
// that passphrase opens. It returns the bytes to write at offset 0 of the
// image (the header and keyslot material, shorter than the data offset),
// the header, and the volume key (for Open's callers that format and use
// an image at once; clear it when done).
func Format(passphrase []byte, o FormatOptions) (image []byte, h *Header, key []byte, err error) {
	if o.Version != 1 && o.Version != 2 {
		return nil, nil, nil, fmt.Errorf("luks: format version %d (1 or 2)", o.Version)
	}
	if o.KeySize == 0 {
		o.KeySize = 64
	}
	if o.KeySize != 32 && o.KeySize != 64 {
		return nil, nil, nil, fmt.Errorf("luks: key size %d (32 or 64)", o.KeySize)
	}
	if o.Alignment == 0 {
		o.Alignment = 1 << 20
	}
	if o.Alignment < 4096 || o.Alignment%4096 != 0 {
		return nil, nil, nil, fmt.Errorf("luks: alignment %d is not a multiple of 4096", o.Alignment)
	}
	if o.KDF.Type == "" {
		o.KDF = DefaultKDF(o.Version)
	}
	if o.Version == 1 && o.KDF.Type != "pbkdf2" {
		return nil, nil, nil, fmt.Errorf("luks: LUKS1 keyslots use pbkdf2, not %s", o.KDF.Type)
	}
	if o.DigestIterations == 0 {
		o.DigestIterations = 100000
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	afHash, err := hashByName("sha256")
	if err != nil {
		return nil, nil, nil, err
	}

	// Everything random at once: key, salts, uuid, stripes.
	stripesLen := o.KeySize * (afStripes - 1)
	random := make([]byte, o.KeySize+3*saltLen+16+2*luks2SaltLen+stripesLen)
	if _, err := io.ReadFull(o.Rand, random); err != nil {
		return nil, nil, nil, fmt.Errorf("luks: random bytes: %w", err)
	}
	next := func(n int) []byte { b := random[:n:n]; random = random[n:]; return b }
	key = append([]byte(nil), next(o.KeySize)...)
	kdf := o.KDF
	kdf.Salt = append([]byte(nil), next(saltLen)...)
	h = &Header{
		Version: o.Version, Cipher: "aes", CipherMode: "xts-plain64", KeySize: o.KeySize,
		SectorSize: 512, UUID: uuid4(next(16)),
	}
	h.digest = digest{hash: "sha256", iterations: o.DigestIterations, salt: append([]byte(nil), next(saltLen)...)}
	next(saltLen) // reserved
	salts := [2][]byte{next(luks2SaltLen), next(luks2SaltLen)}
	dlen := sha256Size
	if o.Version == 1 {
		dlen = luks1DigestSize
	}
	if h.digest.value, err = (KDF{Type: "pbkdf2", Hash: "sha256", Iterations: o.DigestIterations, Salt: h.digest.salt}).derive(key, dlen); err != nil {
		return nil, nil, nil, err
	}

	areaSize := roundUp(int64(o.KeySize)*afStripes, 4096)
	slot := Keyslot{
		ID: 0, KeySize: o.KeySize, KDF: kdf, Stripes: afStripes, AFHash: "sha256",
		AreaSize: areaSize, AreaCipher: "aes-xts-plain64", AreaKeySize: o.KeySize,
	}
	var out []byte
	switch o.Version {
	case 1:
		var offsets [luks1Keyslots]int64
		for i := range offsets {
			offsets[i] = luks1FirstSlot + int64(i)*areaSize
		}
		slot.AreaOffset = offsets[0]
		h.DataOffset = roundUp(offsets[luks1Keyslots-1]+areaSize, o.Alignment)
		h.Keyslots = []Keyslot{slot}
		out = make([]byte, slot.AreaOffset+areaSize)
		encodeLUKS1(out, h, offsets)
	case 2:
		h.SectorSize = 4096
		l := luks2Layout{hdrSize: luks2HeaderCopy, dataOffset: roundUp(luks2MetadataArea, o.Alignment)}
		l.keyslotsSize = l.dataOffset - 2*l.hdrSize
		h.DataOffset = l.dataOffset
		slot.AreaOffset = 2 * l.hdrSize
		h.Keyslots = []Keyslot{slot}
		hdrs, err := encodeLUKS2(h, l, salts)
		if err != nil {
			return nil, nil, nil, err
		}
		out = make([]byte, slot.AreaOffset+areaSize)
		copy(out, hdrs)
	}

	// The keyslot: the key split into stripes, encrypted with the key
	// the passphrase derives.
	slotKey, err := kdf.derive(passphrase, o.KeySize)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := newSectorCipher(slotKey, 512, 0)
	clear(slotKey)
	if err != nil {
		return nil, nil, nil, err
	}
	area := out[slot.AreaOffset : slot.AreaOffset+areaSize]
	afSplit(afHash, key, area[:o.KeySize*afStripes], afStripes, next(stripesLen))
	c.encrypt(area, area, 0)
	return out, h, key, nil
}

const sha256Size = 32

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// uuid4 formats 16 random bytes as a version 4 UUID.
func uuid4(b []byte) string {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
