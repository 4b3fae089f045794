package denc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// AddrType says which messenger protocol an address speaks.
type AddrType uint32

// Address types (entity_addr_t::TYPE_*).
const (
	AddrNone   AddrType = 0 // no address
	AddrLegacy AddrType = 1 // msgr v1 ("v1:")
	AddrMsgr2  AddrType = 2 // msgr v2 ("v2:")
	AddrAny    AddrType = 3 // either; printed without a prefix
)

// String returns Ceph's name for t: "none", "v1", "v2", "any" or "???".
func (t AddrType) String() string {
	switch t {
	case AddrNone:
		return "none"
	case AddrLegacy:
		return "v1"
	case AddrMsgr2:
		return "v2"
	case AddrAny:
		return "any"
	}
	return "???"
}

// Address families as Linux numbers them, which is what Ceph puts on the
// wire.
const (
	AFUnspec uint16 = 0
	AFInet   uint16 = 2
	AFInet6  uint16 = 10
)

// Sizes of the socket address structures Ceph copies onto the wire.
const (
	sockaddrInLen      = 16  // sizeof(struct sockaddr_in)
	sockaddrIn6Len     = 28  // sizeof(struct sockaddr_in6), also the union Ceph keeps
	sockaddrStorageLen = 128 // sizeof(struct sockaddr_storage), the legacy encoding
)

// EntityAddr is Ceph's entity_addr_t: a protocol type, a nonce that tells
// apart successive instances of a daemon at the same address, and an IPv4
// or IPv6 socket address (or none).
//
// Two encodings exist. The modern one (peers with MSG_ADDR2, every Ceph
// since Kraken) is a marker byte 1, a versioned envelope, type, nonce and
// a length-prefixed struct sockaddr whose family is little-endian and whose
// port is big-endian. The legacy one is a u32 0, the nonce and a 128-byte
// sockaddr_storage whose family is big-endian. Decode reads both; Encode
// writes the modern one and EncodeLegacy the other.
type EntityAddr struct {
	Type  AddrType
	Nonce uint32
	// IP is the address; the zero netip.Addr means no address family
	// (AF_UNSPEC), as in a blank entity_addr_t.
	IP   netip.Addr
	Port uint16
	// FlowInfo (network byte order on the wire) and ScopeID are the
	// sockaddr_in6 fields, kept for exact re-encoding; zero for IPv4.
	FlowInfo uint32
	ScopeID  uint32
}

// NewEntityAddr returns an address of type t at ap with the given nonce.
func NewEntityAddr(t AddrType, ap netip.AddrPort, nonce uint32) EntityAddr {
	return EntityAddr{Type: t, Nonce: nonce, IP: ap.Addr().WithZone(""), Port: ap.Port()}
}

// Family returns the address family Ceph would report: AFInet, AFInet6
// or AFUnspec.
func (a EntityAddr) Family() uint16 {
	switch {
	case a.IP.Is4():
		return AFInet
	case a.IP.Is6():
		return AFInet6
	}
	return AFUnspec
}

// AddrPort returns the IP and port, suitable for net.Dial after
// String(); it is invalid when the address has no family.
func (a EntityAddr) AddrPort() netip.AddrPort { return netip.AddrPortFrom(a.IP, a.Port) }

// IsZero reports whether a is a blank entity_addr_t.
func (a EntityAddr) IsZero() bool { return a == EntityAddr{} }

// SameInstance reports whether a and b name one running instance of an
// entity: the same IP, port and nonce, whatever address type each was
// written with (the nonce tells a restarted process from its predecessor).
func (a EntityAddr) SameInstance(b EntityAddr) bool {
	return a.IP == b.IP && a.Port == b.Port && a.Nonce == b.Nonce
}

// sockaddr returns the socket address as Ceph keeps it in memory (the
// 28-byte union, family in host = little-endian order) and the length
// Ceph encodes for it.
func (a EntityAddr) sockaddr() ([sockaddrIn6Len]byte, int) {
	var u [sockaddrIn6Len]byte
	switch a.Family() {
	case AFInet:
		binary.LittleEndian.PutUint16(u[0:], AFInet)
		binary.BigEndian.PutUint16(u[2:], a.Port)
		ip := a.IP.As4()
		copy(u[4:8], ip[:])
		return u, sockaddrInLen
	case AFInet6:
		binary.LittleEndian.PutUint16(u[0:], AFInet6)
		binary.BigEndian.PutUint16(u[2:], a.Port)
		binary.BigEndian.PutUint32(u[4:], a.FlowInfo)
		ip := a.IP.As16()
		copy(u[8:24], ip[:])
		binary.LittleEndian.PutUint32(u[24:], a.ScopeID)
		return u, sockaddrIn6Len
	}
	return u, sockaddrIn6Len
}

// setSockaddr fills the IP fields from family and the bytes that follow
// the family in a struct sockaddr (zero-padded by the caller to at least
// 26 bytes). It returns false for families other than IPv4 and IPv6.
func (a *EntityAddr) setSockaddr(family uint16, data []byte) bool {
	a.IP, a.Port, a.FlowInfo, a.ScopeID = netip.Addr{}, 0, 0, 0
	switch family {
	case AFUnspec:
		return true
	case AFInet:
		a.Port = binary.BigEndian.Uint16(data[0:])
		a.IP = netip.AddrFrom4([4]byte(data[2:6]))
		return true
	case AFInet6:
		a.Port = binary.BigEndian.Uint16(data[0:])
		a.FlowInfo = binary.BigEndian.Uint32(data[2:])
		a.IP = netip.AddrFrom16([16]byte(data[6:22]))
		a.ScopeID = binary.LittleEndian.Uint32(data[22:])
		return true
	}
	return false
}

// Decode reads an entity_addr_t in either encoding.
func (a *EntityAddr) Decode(d *Decoder) {
	switch m := d.U8("entity_addr_t marker"); {
	case d.Err() != nil:
	case m == 0:
		a.decodeLegacyAfterMarker(d)
	case m == 1:
		a.decodeAfterMarker(d)
	default:
		d.Failf("entity_addr_t marker", "marker %d, want 0 or 1", m)
	}
}

// decodeAfterMarker reads the modern encoding after its marker byte 1.
func (a *EntityAddr) decodeAfterMarker(d *Decoder) {
	*a = EntityAddr{}
	d.Versioned("entity_addr_t", 1, func(d *Decoder, _ uint8) {
		a.Type = AddrType(d.U32("entity_addr_t type"))
		a.Nonce = d.U32("entity_addr_t nonce")
		elen := d.U32("entity_addr_t sockaddr length")
		if elen == 0 || d.Err() != nil {
			return
		}
		if elen < 2 {
			d.Failf("entity_addr_t sockaddr", "length %d smaller than the family", elen)
			return
		}
		family := d.U16("entity_addr_t family")
		max := sockaddrIn6Len
		if family == AFInet {
			max = sockaddrInLen
		}
		if int64(elen) > int64(max) {
			d.Failf("entity_addr_t sockaddr", "length %d exceeds %d for family %d", elen, max, family)
			return
		}
		raw := d.Raw("entity_addr_t sockaddr", int(elen)-2)
		if d.Err() != nil {
			return
		}
		var data [sockaddrIn6Len - 2]byte
		copy(data[:], raw)
		if !a.setSockaddr(family, data[:]) {
			d.Failf("entity_addr_t family", "unsupported address family %d", family)
		}
	})
}

// decodeLegacyAfterMarker reads the legacy encoding after its first byte
// (the low byte of a u32 type that is always 0).
func (a *EntityAddr) decodeLegacyAfterMarker(d *Decoder) {
	*a = EntityAddr{Type: AddrLegacy}
	d.Skip("legacy entity_addr_t type", 3)
	a.Nonce = d.U32("legacy entity_addr_t nonce")
	ss := d.Raw("legacy entity_addr_t sockaddr_storage", sockaddrStorageLen)
	if d.Err() != nil {
		return
	}
	// Ceph keeps only IPv4 and IPv6 addresses from the legacy form and
	// silently blanks anything else.
	if !a.setSockaddr(binary.BigEndian.Uint16(ss), ss[2:]) {
		a.setSockaddr(AFUnspec, nil)
	}
}

// Encode writes the modern (MSG_ADDR2) encoding.
func (a EntityAddr) Encode(e *Encoder) {
	e.U8(1)
	e.Versioned(1, 1, func(e *Encoder) {
		e.U32(uint32(a.Type))
		e.U32(a.Nonce)
		u, n := a.sockaddr()
		e.U32(uint32(n))
		e.Raw(u[:n])
	})
}

// EncodeLegacy writes the encoding for peers without MSG_ADDR2. The type
// is not carried: such peers only know legacy addresses.
func (a EntityAddr) EncodeLegacy(e *Encoder) {
	e.U32(0)
	e.U32(a.Nonce)
	u, _ := a.sockaddr()
	var ss [sockaddrStorageLen]byte
	copy(ss[:], u[:])
	binary.BigEndian.PutUint16(ss[0:], a.Family())
	e.Raw(ss[:])
}

// Compare orders addresses as Ceph's operator< does (a memcmp of the
// in-memory entity_addr_t on a little-endian machine). It returns -1, 0
// or +1. MonMap uses this order to rank legacy monitors.
func (a EntityAddr) Compare(b EntityAddr) int {
	ma, mb := a.memImage(), b.memImage()
	return bytes.Compare(ma[:], mb[:])
}

func (a EntityAddr) memImage() [8 + sockaddrIn6Len]byte {
	var m [8 + sockaddrIn6Len]byte
	binary.LittleEndian.PutUint32(m[0:], uint32(a.Type))
	binary.LittleEndian.PutUint32(m[4:], a.Nonce)
	u, _ := a.sockaddr()
	copy(m[8:], u[:])
	return m
}

// sockaddrString formats the socket address as Ceph's operator<< for a
// sockaddr does.
func (a EntityAddr) sockaddrString() string {
	switch a.Family() {
	case AFInet:
		return a.IP.String() + ":" + strconv.Itoa(int(a.Port))
	case AFInet6:
		return "[" + a.IP.String() + "]:" + strconv.Itoa(int(a.Port))
	}
	return "(unrecognized address family 0)"
}

// String formats a as Ceph does: "v2:127.0.0.1:3300/0",
// "v1:[::1]:6789/1234", "-" for type none, no prefix for type any.
func (a EntityAddr) String() string {
	if a.Type == AddrNone {
		return "-"
	}
	var b strings.Builder
	if a.Type != AddrAny {
		b.WriteString(a.Type.String())
		b.WriteByte(':')
	}
	b.WriteString(a.sockaddrString())
	b.WriteByte('/')
	b.WriteString(strconv.FormatUint(uint64(a.Nonce), 10))
	return b.String()
}

// ParseEntityAddr parses an address as Ceph writes them:
// "[v1:|v2:|any:]IP[:PORT][/NONCE]", IPv6 in brackets when a port
// follows ("v2:[::1]:3300/0"), or "-" for no address. Without a prefix
// the type is AddrAny (Ceph then picks by port: 6789 means v1, 3300 v2).
func ParseEntityAddr(s string) (EntityAddr, error) {
	a, rest, err := parseEntityAddrPrefix(s)
	if err != nil {
		return EntityAddr{}, err
	}
	if rest != "" {
		return EntityAddr{}, fmt.Errorf("denc: address %s: trailing %s", quoteInput(s), quoteInput(rest))
	}
	return a, nil
}

// parseEntityAddrPrefix parses one address at the start of s and returns
// what follows it (a ',' or ']' in an address vector).
func parseEntityAddrPrefix(s string) (EntityAddr, string, error) {
	var a EntityAddr
	a.Type = AddrAny
	rest := s
	switch {
	case strings.HasPrefix(rest, "v1:"):
		a.Type, rest = AddrLegacy, rest[3:]
	case strings.HasPrefix(rest, "v2:"):
		a.Type, rest = AddrMsgr2, rest[3:]
	case strings.HasPrefix(rest, "any:"):
		a.Type, rest = AddrAny, rest[4:]
	case strings.HasPrefix(rest, "-"):
		return EntityAddr{}, rest[1:], nil
	}
	bad := func(why string) (EntityAddr, string, error) {
		return EntityAddr{}, s, fmt.Errorf("denc: address %s: %s", quoteInput(s), why)
	}
	var host string
	bracketed := strings.HasPrefix(rest, "[")
	if bracketed {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return bad("missing ]")
		}
		host, rest = rest[1:end], rest[end+1:]
	} else {
		// The host runs over the characters an IPv4 or IPv6 literal may
		// hold; a bare IPv6 address cannot be followed by a port.
		n := 0
		for n < len(rest) && strings.IndexByte("0123456789abcdefABCDEF.:", rest[n]) >= 0 {
			n++
		}
		host = rest[:n]
		if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() {
			rest = rest[n:]
		} else {
			n = 0
			for n < len(rest) && strings.IndexByte("0123456789.", rest[n]) >= 0 {
				n++
			}
			host, rest = rest[:n], rest[n:]
		}
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return bad("bad IP address")
	}
	if !bracketed && ip.Is6() && strings.HasPrefix(rest, ":") {
		return bad("IPv6 address with a port needs brackets")
	}
	a.IP = ip
	if strings.HasPrefix(rest, ":") {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		p, err := strconv.ParseUint(rest[1:n], 10, 16)
		if err != nil {
			return bad("bad port")
		}
		a.Port, rest = uint16(p), rest[n:]
	}
	if strings.HasPrefix(rest, "/") {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		v, err := strconv.ParseUint(rest[1:n], 10, 32)
		if err != nil {
			return bad("bad nonce")
		}
		a.Nonce, rest = uint32(v), rest[n:]
	}
	return a, rest, nil
}

// quoteInput quotes text from an input for an error message, at most
// maxQuoted bytes of it: an error about a long input names where it
// went wrong without copying it whole (each nested error would copy it
// again).
func quoteInput(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:maxQuoted]) + fmt.Sprintf("... (%d bytes)", len(s))
}

// maxQuoted bounds quoteInput.
const maxQuoted = 64
