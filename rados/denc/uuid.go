package denc

import (
	"encoding/hex"
	"fmt"
)

// UUID is Ceph's uuid_d (a cluster fsid, an OSD's uuid): 16 raw bytes on
// the wire, no length prefix.
type UUID [16]byte

// Decode reads 16 raw bytes.
func (u *UUID) Decode(d *Decoder) {
	if p := d.Raw("uuid", 16); p != nil {
		copy(u[:], p)
	}
}

// Encode writes 16 raw bytes.
func (u UUID) Encode(e *Encoder) { e.Raw(u[:]) }

// IsZero reports whether u is all zeros.
func (u UUID) IsZero() bool { return u == UUID{} }

// String formats u as "8-4-4-4-12" lower-case hex.
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// ParseUUID parses the "8-4-4-4-12" hex form.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("denc: uuid %q: want 8-4-4-4-12 hex digits", s)
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return UUID{}, fmt.Errorf("denc: uuid %q: %w", s, err)
	}
	return u, nil
}
