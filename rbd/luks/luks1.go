package luks

import (
	"encoding/binary"
	"fmt"
)

// The LUKS1 on-disk header (cryptsetup's LUKS1 specification): big-endian
// fields at fixed offsets, eight keyslots of 48 bytes, 592 bytes in all.
// Lengths and offsets of keyslot material are in 512-byte sectors.
const (
	luks1HeaderSize    = 592
	luks1KeyslotBase   = 208
	luks1KeyslotSize   = 48
	luks1Keyslots      = 8
	luks1DigestSize    = 20
	luks1SaltSize      = 32
	luks1SlotActive    = 0x00AC71F3
	luks1SlotInactive  = 0x0000DEAD
	luks1FieldCipher   = 8
	luks1FieldMode     = 40
	luks1FieldHash     = 72
	luks1FieldPayload  = 104
	luks1FieldKeyBytes = 108
	luks1FieldDigest   = 112
	luks1FieldSalt     = 132
	luks1FieldIter     = 164
	luks1FieldUUID     = 168
	luks1NameLen       = 32
	luks1UUIDLen       = 40
	luks1MaxStripes    = 1 << 16
)

func parseLUKS1(b []byte) (*Header, error) {
	be := binary.BigEndian
	h := &Header{
		Version:    1,
		Cipher:     cstring(b[luks1FieldCipher : luks1FieldCipher+luks1NameLen]),
		CipherMode: cstring(b[luks1FieldMode : luks1FieldMode+luks1NameLen]),
		KeySize:    int(be.Uint32(b[luks1FieldKeyBytes:])),
		SectorSize: 512,
		DataOffset: int64(be.Uint32(b[luks1FieldPayload:])) * 512,
		UUID:       cstring(b[luks1FieldUUID : luks1FieldUUID+luks1UUIDLen]),
	}
	hash := cstring(b[luks1FieldHash : luks1FieldHash+luks1NameLen])
	h.digest = digest{
		hash:       hash,
		iterations: int(be.Uint32(b[luks1FieldIter:])),
		salt:       b[luks1FieldSalt : luks1FieldSalt+luks1SaltSize : luks1FieldSalt+luks1SaltSize],
		value:      b[luks1FieldDigest : luks1FieldDigest+luks1DigestSize : luks1FieldDigest+luks1DigestSize],
	}
	if h.KeySize <= 0 || h.KeySize > 512 {
		return nil, fmt.Errorf("%w: LUKS1 key size %d", ErrCorrupt, h.KeySize)
	}
	for i := range luks1Keyslots {
		s := b[luks1KeyslotBase+i*luks1KeyslotSize:]
		switch be.Uint32(s) {
		case luks1SlotInactive:
			continue
		case luks1SlotActive:
		default:
			return nil, fmt.Errorf("%w: LUKS1 keyslot %d state %#x", ErrCorrupt, i, be.Uint32(s))
		}
		stripes := int(be.Uint32(s[44:]))
		if stripes <= 0 || stripes > luks1MaxStripes {
			return nil, fmt.Errorf("%w: LUKS1 keyslot %d has %d stripes", ErrCorrupt, i, stripes)
		}
		area := int64(h.KeySize) * int64(stripes)
		h.Keyslots = append(h.Keyslots, Keyslot{
			ID:      i,
			KeySize: h.KeySize,
			KDF: KDF{
				Type:       "pbkdf2",
				Hash:       hash,
				Iterations: int(be.Uint32(s[4:])),
				Salt:       s[8 : 8+luks1SaltSize : 8+luks1SaltSize],
			},
			Stripes:     stripes,
			AFHash:      hash,
			AreaOffset:  int64(be.Uint32(s[40:])) * 512,
			AreaSize:    (area + 511) &^ 511,
			AreaCipher:  h.Cipher + "-" + h.CipherMode,
			AreaKeySize: h.KeySize,
		})
	}
	return h, nil
}

// encodeLUKS1 writes h's LUKS1 header into b (luks1HeaderSize bytes).
// slotOffsets gives every keyslot's material offset in bytes, active or
// not, as cryptsetup lays them out.
func encodeLUKS1(b []byte, h *Header, slotOffsets [luks1Keyslots]int64) {
	be := binary.BigEndian
	copy(b, magic)
	be.PutUint16(b[6:], 1)
	copy(b[luks1FieldCipher:luks1FieldCipher+luks1NameLen], h.Cipher)
	copy(b[luks1FieldMode:luks1FieldMode+luks1NameLen], h.CipherMode)
	copy(b[luks1FieldHash:luks1FieldHash+luks1NameLen], h.digest.hash)
	be.PutUint32(b[luks1FieldPayload:], uint32(h.DataOffset/512))
	be.PutUint32(b[luks1FieldKeyBytes:], uint32(h.KeySize))
	copy(b[luks1FieldDigest:luks1FieldDigest+luks1DigestSize], h.digest.value)
	copy(b[luks1FieldSalt:luks1FieldSalt+luks1SaltSize], h.digest.salt)
	be.PutUint32(b[luks1FieldIter:], uint32(h.digest.iterations))
	copy(b[luks1FieldUUID:luks1FieldUUID+luks1UUIDLen], h.UUID)
	active := map[int]Keyslot{}
	for _, k := range h.Keyslots {
		active[k.ID] = k
	}
	for i := range luks1Keyslots {
		s := b[luks1KeyslotBase+i*luks1KeyslotSize:]
		be.PutUint32(s[40:], uint32(slotOffsets[i]/512))
		be.PutUint32(s[44:], afStripes)
		k, ok := active[i]
		if !ok {
			be.PutUint32(s, luks1SlotInactive)
			continue
		}
		be.PutUint32(s, luks1SlotActive)
		be.PutUint32(s[4:], uint32(k.KDF.Iterations))
		copy(s[8:8+luks1SaltSize], k.KDF.Salt)
	}
}
