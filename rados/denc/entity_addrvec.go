package denc

import (
	"fmt"
	"strings"
)

// MinEntityAddrLen is the smallest encoding of one entity_addr_t (marker,
// envelope, type, nonce, zero sockaddr length; the legacy form is longer).
// Decoders of lists of addresses check counts against it.
const MinEntityAddrLen = 1 + 6 + 12

// MinEntityAddrVecLen is the smallest encoding of an entity_addrvec_t:
// the marker and an empty list's count.
const MinEntityAddrVecLen = 1 + 4

// EntityAddrVec is Ceph's entity_addrvec_t: the addresses one entity
// listens on, typically a v2 and a v1 address.
//
// The modern encoding is a marker byte 2 and a list of entity_addr_t.
// Decode also accepts the two older forms Ceph still reads, a single
// entity_addr_t in its modern (marker 1) or legacy (marker 0) encoding.
type EntityAddrVec []EntityAddr

// Decode reads an entity_addrvec_t in any of its encodings.
func (v *EntityAddrVec) Decode(d *Decoder) {
	*v = nil
	m := d.U8("entity_addrvec_t marker")
	if d.Err() != nil {
		return
	}
	var a EntityAddr
	switch m {
	case 0:
		a.decodeLegacyAfterMarker(d)
	case 1:
		a.decodeAfterMarker(d)
	case 2:
		*v = List(d, "entity_addrvec_t", MinEntityAddrLen, Get[EntityAddr])
		return
	default:
		d.Failf("entity_addrvec_t marker", "marker %d, want 0, 1 or 2", m)
		return
	}
	if d.Err() == nil {
		*v = EntityAddrVec{a}
	}
}

// Encode writes the modern (MSG_ADDR2) encoding.
func (v EntityAddrVec) Encode(e *Encoder) {
	e.U8(2)
	PutList(e, v, Put[EntityAddr])
}

// EncodeLegacy writes, for peers without MSG_ADDR2, the legacy encoding
// of the vector's legacy (v1) address, or of a blank one.
func (v EntityAddrVec) EncodeLegacy(e *Encoder) {
	a, _ := v.Find(AddrLegacy)
	a.EncodeLegacy(e)
}

// Find returns the first address of type t.
func (v EntityAddrVec) Find(t AddrType) (EntityAddr, bool) {
	for _, a := range v {
		if a.Type == t {
			return a, true
		}
	}
	return EntityAddr{}, false
}

// Msgr2 returns the first v2 address, the one a msgr2 client dials.
func (v EntityAddrVec) Msgr2() (EntityAddr, bool) { return v.Find(AddrMsgr2) }

// LegacyOrFront returns the first v1 address, else the first address,
// else a blank one (Ceph's legacy_or_front_addr).
func (v EntityAddrVec) LegacyOrFront() EntityAddr {
	if a, ok := v.Find(AddrLegacy); ok {
		return a
	}
	if len(v) > 0 {
		return v[0]
	}
	return EntityAddr{}
}

// String formats v as Ceph does: "" when empty, the single address, or
// "[v2:1.2.3.4:3300/0,v1:1.2.3.4:6789/0]".
func (v EntityAddrVec) String() string {
	switch len(v) {
	case 0:
		return ""
	case 1:
		return v[0].String()
	}
	parts := make([]string, len(v))
	for i, a := range v {
		parts[i] = a.String()
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// ParseEntityAddrVec parses a single address or a bracketed,
// comma-separated list: "[v2:1.2.3.4:3300/0,v1:1.2.3.4:6789/0]". A
// bracketed IPv6 address ("[::1]:3300") is a single address.
func ParseEntityAddrVec(s string) (EntityAddrVec, error) {
	if !strings.HasPrefix(s, "[") {
		a, err := ParseEntityAddr(s)
		if err != nil {
			return nil, err
		}
		return EntityAddrVec{a}, nil
	}
	if a, err := ParseEntityAddr(s); err == nil && a.IP.Is6() {
		return EntityAddrVec{a}, nil
	}
	// Two passes: the first validates and counts, so the vector is one
	// allocation of its final size (append's doubling would let a long
	// list of short addresses allocate several times its input).
	n, err := walkEntityAddrVec(s, nil)
	if err != nil {
		return nil, err
	}
	v := make(EntityAddrVec, 0, n)
	if _, err := walkEntityAddrVec(s, func(a EntityAddr) { v = append(v, a) }); err != nil {
		return nil, err
	}
	return v, nil
}

// MaxParsedAddrs bounds the addresses ParseEntityAddrVec accepts in one
// vector. A Ceph daemon binds one v2 and one v1 address per address
// family, so real vectors hold at most four; the bound keeps a long
// list of two-byte addresses ("::") from costing 48 bytes of memory for
// every three of input.
const MaxParsedAddrs = 64

// walkEntityAddrVec parses the bracketed list s, calling each (when not
// nil) with every address in order, and returns how many there are.
func walkEntityAddrVec(s string, each func(EntityAddr)) (int, error) {
	n := 0
	rest := s[1:]
	for {
		a, r, err := parseEntityAddrPrefix(rest)
		if err != nil {
			return 0, fmt.Errorf("denc: address vector %s: %w", quoteInput(s), err)
		}
		n++
		if n > MaxParsedAddrs {
			return 0, fmt.Errorf("denc: address vector %s: more than %d addresses", quoteInput(s), MaxParsedAddrs)
		}
		if each != nil {
			each(a)
		}
		switch {
		case r == "]":
			return n, nil
		case strings.HasPrefix(r, ","):
			rest = r[1:]
		default:
			return 0, fmt.Errorf("denc: address vector %s: unexpected %s", quoteInput(s), quoteInput(r))
		}
	}
}
