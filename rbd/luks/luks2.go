package luks

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"sort"
	"strconv"
)

// The LUKS2 on-disk header (cryptsetup's "LUKS2 On-Disk Format
// Specification"): a 4096-byte big-endian binary header followed by a
// JSON area, hdr_size bytes in all, checksummed with SHA-256 over every
// byte with the checksum field zeroed; a second copy follows at hdr_size.
// Keyslot material lies after both copies, the data segment after that.
const (
	luks2BinarySize   = 4096
	luks2FieldHdrSize = 8
	luks2FieldSeqID   = 16
	luks2FieldCsumAlg = 72
	luks2FieldSalt    = 104
	luks2FieldUUID    = 168
	luks2FieldHdrOff  = 256
	luks2FieldCsum    = 448
	luks2CsumLen      = 64
	luks2SaltLen      = 64
	// LUKS2 allows header sizes of 16 KiB to 4 MiB, powers of two.
	luks2MinHeader = 16 << 10
	luks2MaxHeader = 4 << 20
)

// luks2HeaderSize returns hdr_size from a LUKS2 binary header, checked.
func luks2HeaderSize(b []byte) (int64, error) {
	n := binary.BigEndian.Uint64(b[luks2FieldHdrSize:])
	if n < luks2MinHeader || n > luks2MaxHeader || bits.OnesCount64(n) != 1 {
		return 0, fmt.Errorf("%w: LUKS2 header size %d", ErrCorrupt, n)
	}
	return int64(n), nil
}

// luks2Checksum computes the SHA-256 checksum of a whole header copy
// (binary header and JSON) with its checksum field taken as zeroes.
func luks2Checksum(b []byte) [sha256.Size]byte {
	d := sha256.New()
	d.Write(b[:luks2FieldCsum])
	d.Write(make([]byte, luks2CsumLen))
	d.Write(b[luks2FieldCsum+luks2CsumLen:])
	var sum [sha256.Size]byte
	d.Sum(sum[:0])
	return sum
}

// The JSON metadata, as far as this package reads and writes it. Sizes
// and offsets are decimal strings (they may exceed JSON's exact integer
// range); small counts are numbers.
type luks2JSON struct {
	Keyslots map[string]luks2Keyslot    `json:"keyslots"`
	Tokens   map[string]json.RawMessage `json:"tokens"`
	Segments map[string]luks2Segment    `json:"segments"`
	Digests  map[string]luks2Digest     `json:"digests"`
	Config   luks2Config                `json:"config"`
}

type luks2Keyslot struct {
	Type    string `json:"type"`
	KeySize int    `json:"key_size"`
	AF      struct {
		Type    string `json:"type"`
		Stripes int    `json:"stripes"`
		Hash    string `json:"hash"`
	} `json:"af"`
	Area struct {
		Type       string `json:"type"`
		Offset     string `json:"offset"`
		Size       string `json:"size"`
		Encryption string `json:"encryption"`
		KeySize    int    `json:"key_size"`
	} `json:"area"`
	KDF struct {
		Type       string `json:"type"`
		Hash       string `json:"hash,omitempty"`
		Iterations int    `json:"iterations,omitempty"`
		Time       int    `json:"time,omitempty"`
		Memory     int    `json:"memory,omitempty"`
		CPUs       int    `json:"cpus,omitempty"`
		Salt       string `json:"salt"`
	} `json:"kdf"`
}

type luks2Segment struct {
	Type       string   `json:"type"`
	Offset     string   `json:"offset"`
	Size       string   `json:"size"`
	IVTweak    string   `json:"iv_tweak"`
	Encryption string   `json:"encryption"`
	SectorSize int      `json:"sector_size"`
	Integrity  any      `json:"integrity,omitempty"`
	Flags      []string `json:"flags,omitempty"`
}

type luks2Digest struct {
	Type       string   `json:"type"`
	Keyslots   []string `json:"keyslots"`
	Segments   []string `json:"segments"`
	Hash       string   `json:"hash"`
	Iterations int      `json:"iterations"`
	Salt       string   `json:"salt"`
	Digest     string   `json:"digest"`
}

type luks2Config struct {
	JSONSize     string   `json:"json_size"`
	KeyslotsSize string   `json:"keyslots_size"`
	Flags        []string `json:"flags,omitempty"`
	Requirements *struct {
		Mandatory []string `json:"mandatory,omitempty"`
	} `json:"requirements,omitempty"`
}

func parseLUKS2(b []byte) (*Header, error) {
	size := int64(len(b))
	if alg := cstring(b[luks2FieldCsumAlg : luks2FieldCsumAlg+32]); alg != "sha256" {
		return nil, fmt.Errorf("%w: LUKS2 header checksum %q", ErrUnsupported, alg)
	}
	if off := binary.BigEndian.Uint64(b[luks2FieldHdrOff:]); off != 0 {
		return nil, fmt.Errorf("%w: primary LUKS2 header claims offset %d", ErrCorrupt, off)
	}
	if sum := luks2Checksum(b); !bytes.Equal(sum[:], b[luks2FieldCsum:luks2FieldCsum+sha256.Size]) {
		return nil, fmt.Errorf("%w: LUKS2 header checksum mismatch", ErrCorrupt)
	}
	area := b[luks2BinarySize:size]
	if i := bytes.IndexByte(area, 0); i >= 0 {
		area = area[:i]
	}
	var m luks2JSON
	if err := json.Unmarshal(area, &m); err != nil {
		return nil, fmt.Errorf("%w: LUKS2 JSON: %v", ErrCorrupt, err)
	}
	if m.Config.Requirements != nil && len(m.Config.Requirements.Mandatory) > 0 {
		return nil, fmt.Errorf("%w: LUKS2 requirements %q", ErrUnsupported, m.Config.Requirements.Mandatory)
	}
	h := &Header{Version: 2, UUID: cstring(b[luks2FieldUUID : luks2FieldUUID+40])}

	// The data segment: exactly one, of type crypt.
	if len(m.Segments) != 1 {
		return nil, fmt.Errorf("%w: %d LUKS2 segments (a reencryption?)", ErrUnsupported, len(m.Segments))
	}
	var segID string
	for id, s := range m.Segments {
		segID = id
		if s.Type != "crypt" || s.Integrity != nil {
			return nil, fmt.Errorf("%w: LUKS2 segment of type %q", ErrUnsupported, s.Type)
		}
		off, err := strconv.ParseUint(s.Offset, 10, 63)
		if err != nil {
			return nil, fmt.Errorf("%w: LUKS2 segment offset %q", ErrCorrupt, s.Offset)
		}
		if s.Size != "dynamic" {
			return nil, fmt.Errorf("%w: LUKS2 segment of fixed size %q", ErrUnsupported, s.Size)
		}
		tweak, err := strconv.ParseUint(s.IVTweak, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: LUKS2 iv_tweak %q", ErrCorrupt, s.IVTweak)
		}
		switch s.SectorSize {
		case 512, 1024, 2048, 4096:
		default:
			return nil, fmt.Errorf("%w: LUKS2 sector size %d", ErrCorrupt, s.SectorSize)
		}
		if off%uint64(s.SectorSize) != 0 {
			return nil, fmt.Errorf("%w: LUKS2 segment offset %d not a multiple of its sector size", ErrCorrupt, off)
		}
		h.DataOffset, h.IVTweak, h.SectorSize = int64(off), tweak, s.SectorSize
		h.Cipher, h.CipherMode = splitCipher(s.Encryption)
	}

	// The digest that covers the data segment gives the volume key's
	// check and which keyslots hold that key.
	for _, d := range m.Digests {
		if !contains(d.Segments, segID) {
			continue
		}
		if d.Type != "pbkdf2" {
			return nil, fmt.Errorf("%w: LUKS2 digest type %q", ErrUnsupported, d.Type)
		}
		salt, err1 := base64.StdEncoding.DecodeString(d.Salt)
		value, err2 := base64.StdEncoding.DecodeString(d.Digest)
		if err1 != nil || err2 != nil || d.Iterations <= 0 || len(value) == 0 || len(value) > 64 {
			return nil, fmt.Errorf("%w: LUKS2 digest", ErrCorrupt)
		}
		h.digest = digest{hash: d.Hash, iterations: d.Iterations, salt: salt, value: value, keyslots: []int{}}
		for _, k := range d.Keyslots {
			id, err := strconv.Atoi(k)
			if err != nil {
				return nil, fmt.Errorf("%w: LUKS2 digest names keyslot %q", ErrCorrupt, k)
			}
			h.digest.keyslots = append(h.digest.keyslots, id)
		}
		break
	}
	if h.digest.value == nil {
		return nil, fmt.Errorf("%w: no LUKS2 digest for the data segment", ErrCorrupt)
	}

	for idStr, k := range m.Keyslots {
		id, err := strconv.Atoi(idStr)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("%w: LUKS2 keyslot id %q", ErrCorrupt, idStr)
		}
		if !containsInt(h.digest.keyslots, id) {
			continue // a keyslot for another segment or an unbound key
		}
		if k.Type != "luks2" || k.AF.Type != "luks1" || k.Area.Type != "raw" {
			return nil, fmt.Errorf("%w: LUKS2 keyslot %d of type %s/%s/%s", ErrUnsupported, id, k.Type, k.AF.Type, k.Area.Type)
		}
		off, err1 := strconv.ParseUint(k.Area.Offset, 10, 63)
		asize, err2 := strconv.ParseUint(k.Area.Size, 10, 63)
		salt, err3 := base64.StdEncoding.DecodeString(k.KDF.Salt)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("%w: LUKS2 keyslot %d area or salt", ErrCorrupt, id)
		}
		if k.AF.Stripes <= 0 || k.AF.Stripes > luks1MaxStripes || k.KeySize <= 0 || k.KeySize > 512 ||
			uint64(k.KeySize)*uint64(k.AF.Stripes) > asize {
			return nil, fmt.Errorf("%w: LUKS2 keyslot %d holds %d stripes of %d bytes in %d", ErrCorrupt, id, k.AF.Stripes, k.KeySize, asize)
		}
		h.Keyslots = append(h.Keyslots, Keyslot{
			ID:      id,
			KeySize: k.KeySize,
			KDF: KDF{
				Type: k.KDF.Type, Hash: k.KDF.Hash, Iterations: k.KDF.Iterations,
				Time: k.KDF.Time, Memory: k.KDF.Memory, CPUs: k.KDF.CPUs, Salt: salt,
			},
			Stripes:     k.AF.Stripes,
			AFHash:      k.AF.Hash,
			AreaOffset:  int64(off),
			AreaSize:    int64(asize),
			AreaCipher:  k.Area.Encryption,
			AreaKeySize: k.Area.KeySize,
		})
		h.KeySize = k.KeySize
	}
	sort.Slice(h.Keyslots, func(i, j int) bool { return h.Keyslots[i].ID < h.Keyslots[j].ID })
	if len(h.Keyslots) == 0 {
		return nil, fmt.Errorf("%w: no LUKS2 keyslot for the data segment", ErrCorrupt)
	}
	return h, nil
}

// splitCipher splits "aes-xts-plain64" into "aes" and "xts-plain64".
func splitCipher(s string) (cipher, mode string) {
	if i := bytes.IndexByte([]byte(s), '-'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// luks2Layout is where Format puts a LUKS2 header's parts.
type luks2Layout struct {
	hdrSize      int64 // each header copy
	keyslotsSize int64 // the keyslot area after both copies
	dataOffset   int64
}

// encodeLUKS2 returns both header copies (2*hdrSize bytes) for h, whose
// single keyslot and digest Format filled in. salts are the two copies'
// 64-byte binary-header salts.
func encodeLUKS2(h *Header, l luks2Layout, salts [2][]byte) ([]byte, error) {
	k := h.Keyslots[0]
	var ks luks2Keyslot
	ks.Type = "luks2"
	ks.KeySize = k.KeySize
	ks.AF.Type, ks.AF.Stripes, ks.AF.Hash = "luks1", k.Stripes, k.AFHash
	ks.Area.Type = "raw"
	ks.Area.Offset = strconv.FormatInt(k.AreaOffset, 10)
	ks.Area.Size = strconv.FormatInt(k.AreaSize, 10)
	ks.Area.Encryption, ks.Area.KeySize = k.AreaCipher, k.AreaKeySize
	ks.KDF.Type, ks.KDF.Salt = k.KDF.Type, base64.StdEncoding.EncodeToString(k.KDF.Salt)
	if k.KDF.Type == "pbkdf2" {
		ks.KDF.Hash, ks.KDF.Iterations = k.KDF.Hash, k.KDF.Iterations
	} else {
		ks.KDF.Time, ks.KDF.Memory, ks.KDF.CPUs = k.KDF.Time, k.KDF.Memory, k.KDF.CPUs
	}
	id := strconv.Itoa(k.ID)
	m := luks2JSON{
		Keyslots: map[string]luks2Keyslot{id: ks},
		Tokens:   map[string]json.RawMessage{},
		Segments: map[string]luks2Segment{"0": {
			Type: "crypt", Offset: strconv.FormatInt(h.DataOffset, 10), Size: "dynamic",
			IVTweak: strconv.FormatUint(h.IVTweak, 10), Encryption: h.Cipher + "-" + h.CipherMode,
			SectorSize: h.SectorSize,
		}},
		Digests: map[string]luks2Digest{"0": {
			Type: "pbkdf2", Keyslots: []string{id}, Segments: []string{"0"},
			Hash: h.digest.hash, Iterations: h.digest.iterations,
			Salt:   base64.StdEncoding.EncodeToString(h.digest.salt),
			Digest: base64.StdEncoding.EncodeToString(h.digest.value),
		}},
		Config: luks2Config{
			JSONSize:     strconv.FormatInt(l.hdrSize-luks2BinarySize, 10),
			KeyslotsSize: strconv.FormatInt(l.keyslotsSize, 10),
		},
	}
	js, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("luks: encoding LUKS2 metadata: %w", err)
	}
	if int64(len(js)) >= l.hdrSize-luks2BinarySize {
		return nil, fmt.Errorf("luks: LUKS2 metadata of %d bytes does not fit", len(js))
	}
	out := make([]byte, 2*l.hdrSize)
	for c := range 2 {
		b := out[int64(c)*l.hdrSize : int64(c+1)*l.hdrSize]
		be := binary.BigEndian
		if c == 0 {
			copy(b, magic)
		} else {
			copy(b, secondaryMagic)
		}
		be.PutUint16(b[6:], 2)
		be.PutUint64(b[luks2FieldHdrSize:], uint64(l.hdrSize))
		be.PutUint64(b[luks2FieldSeqID:], 1)
		copy(b[luks2FieldCsumAlg:], "sha256")
		copy(b[luks2FieldSalt:luks2FieldSalt+luks2SaltLen], salts[c])
		copy(b[luks2FieldUUID:luks2FieldUUID+40], h.UUID)
		be.PutUint64(b[luks2FieldHdrOff:], uint64(int64(c)*l.hdrSize))
		copy(b[luks2BinarySize:], js)
		sum := luks2Checksum(b)
		copy(b[luks2FieldCsum:], sum[:])
	}
	return out, nil
}
