package luks

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// magic opens every LUKS header, LUKS1 and LUKS2 alike (the LUKS2
// secondary header has another, which librbd never reads).
var magic = []byte{'L', 'U', 'K', 'S', 0xba, 0xbe}

// Header is a decoded LUKS1 or LUKS2 header: what unlocking a keyslot and
// en- or decrypting the data area need.
type Header struct {
	// Version is 1 or 2.
	Version int
	// Cipher and CipherMode name the data cipher as LUKS does ("aes",
	// "xts-plain64"); only that pair is supported for data.
	Cipher, CipherMode string
	// KeySize is the volume key's length in bytes (32 or 64 for AES-XTS).
	KeySize int
	// SectorSize is the data area's encryption unit in bytes: 512 for
	// LUKS1, the segment's sector_size for LUKS2.
	SectorSize int
	// DataOffset is where the data area starts, in bytes from the start
	// of the image.
	DataOffset int64
	// IVTweak is added to every data sector's tweak (LUKS2 iv_tweak,
	// in 512-byte units; 0 for LUKS1).
	IVTweak uint64
	// UUID is the header's UUID string.
	UUID string
	// Clone is set for the header of a clone formatted with a key of its
	// own, which carries cloneMagic instead of the LUKS magic (see
	// magic.go).
	Clone bool
	// Keyslots are the active keyslots, in the order they are tried.
	Keyslots []Keyslot

	digest digest
}

// Keyslot is one active keyslot: the volume key, split into stripes,
// encrypted with a key derived from a passphrase.
type Keyslot struct {
	ID int
	// KeySize is the length of the volume key the slot holds.
	KeySize int
	KDF     KDF
	// Stripes and AFHash are the anti-forensic split's parameters.
	Stripes int
	AFHash  string
	// AreaOffset and AreaSize locate the encrypted stripes, in bytes
	// from the start of the image.
	AreaOffset, AreaSize int64
	// AreaCipher is the stripes' cipher as one string
	// ("aes-xts-plain64") and AreaKeySize its key length.
	AreaCipher  string
	AreaKeySize int
}

// KDF is a keyslot's passphrase-to-key function: "pbkdf2" (Hash,
// Iterations), "argon2i" or "argon2id" (Time, Memory in KiB, CPUs).
type KDF struct {
	Type       string
	Hash       string
	Iterations int
	Time       int
	Memory     int
	CPUs       int
	Salt       []byte
}

// digest checks a candidate volume key: PBKDF2(hash, key, salt,
// iterations) must equal value.
type digest struct {
	hash       string
	iterations int
	salt       []byte
	value      []byte
	// keyslots lists the keyslot ids the digest covers (LUKS2); nil
	// means all.
	keyslots []int
}

// MinHeaderRead is how many bytes from the start of an image HeaderLen
// needs to tell how long the header is.
const MinHeaderRead = 4096

// HeaderLen tells, from the first MinHeaderRead bytes of an image (or
// fewer when the image is smaller), how many bytes Parse needs: the LUKS1
// header, or the LUKS2 binary header with its JSON area.
func HeaderLen(first []byte) (int, error) {
	if len(first) < len(magic)+2 || !hasMagic(first) {
		return 0, errNoMagic
	}
	switch v := binary.BigEndian.Uint16(first[6:]); v {
	case 1:
		return luks1HeaderSize, nil
	case 2:
		if len(first) < luks2BinarySize {
			return 0, fmt.Errorf("%w: LUKS2 binary header truncated at %d bytes", ErrCorrupt, len(first))
		}
		n, err := luks2HeaderSize(first)
		return int(n), err
	default:
		return 0, fmt.Errorf("%w: version %d", ErrNotLUKS, v)
	}
}

// Parse decodes the header at the start of b, which holds at least
// HeaderLen bytes. Keyslot areas are not read: Unlock reads them. The
// header of an encrypted clone (cloneMagic) parses as the LUKS header
// it was formatted as, with Clone set.
func Parse(b []byte) (*Header, error) {
	n, err := HeaderLen(b)
	if err != nil {
		return nil, err
	}
	if len(b) < n {
		return nil, fmt.Errorf("%w: header needs %d bytes, have %d", ErrCorrupt, n, len(b))
	}
	clone := bytes.Equal(b[:len(cloneMagic)], cloneMagic)
	if clone {
		// the checksums and everything else were made with the LUKS
		// magic in place, which librbd puts back before parsing
		b = append([]byte(nil), b[:n]...)
		copy(b, magic)
	}
	var h *Header
	if binary.BigEndian.Uint16(b[6:]) == 1 {
		h, err = parseLUKS1(b[:n])
	} else {
		h, err = parseLUKS2(b[:n])
	}
	if err != nil {
		return nil, err
	}
	h.Clone = clone
	if h.Cipher != "aes" || h.CipherMode != "xts-plain64" {
		return nil, fmt.Errorf("%w: data cipher %s-%s (only aes-xts-plain64)", ErrUnsupported, h.Cipher, h.CipherMode)
	}
	if h.KeySize != 32 && h.KeySize != 64 {
		return nil, fmt.Errorf("%w: %d-byte key for aes-xts", ErrUnsupported, h.KeySize)
	}
	return h, nil
}

// cstring returns the NUL-terminated string at the start of b.
func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
