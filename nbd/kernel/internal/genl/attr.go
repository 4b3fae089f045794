package genl

import (
	"encoding/binary"
	"fmt"
)

// Attribute header layout (struct nlattr): le16 length including the
// header, le16 type whose two top bits are flags.
const (
	attrHeaderLen    = 4
	attrNested       = 1 << 15 // NLA_F_NESTED
	attrNetByteOrder = 1 << 14 // NLA_F_NET_BYTEORDER
	attrTypeMask     = attrNetByteOrder - 1
)

// align4 rounds n up to the netlink alignment of 4 bytes.
func align4(n int) int { return (n + 3) &^ 3 }

// Attr is one decoded netlink attribute. Data aliases the buffer it was
// parsed from.
type Attr struct {
	// Type is the attribute type without its flag bits.
	Type uint16
	// Nested reports that the sender set NLA_F_NESTED. Kernels do not
	// always set it on nested attributes, so callers decide by Type.
	Nested bool
	Data   []byte
}

// ParseAttrs splits b into attributes. Padding after the last attribute
// is allowed; a length that runs past b is an error.
func ParseAttrs(b []byte) ([]Attr, error) {
	var attrs []Attr
	for off := 0; off < len(b); {
		if len(b)-off < attrHeaderLen {
			if allZero(b[off:]) {
				break // trailing padding
			}
			return nil, fmt.Errorf("genl: %d stray bytes after the attributes", len(b)-off)
		}
		n := int(binary.LittleEndian.Uint16(b[off:]))
		typ := binary.LittleEndian.Uint16(b[off+2:])
		if n < attrHeaderLen || n > len(b)-off {
			return nil, fmt.Errorf("genl: attribute type %d at offset %d has length %d, %d bytes left", typ&attrTypeMask, off, n, len(b)-off)
		}
		attrs = append(attrs, Attr{
			Type:   typ & attrTypeMask,
			Nested: typ&attrNested != 0,
			Data:   b[off+attrHeaderLen : off+n : off+n],
		})
		off += min(align4(n), len(b)-off)
	}
	return attrs, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Attrs parses the attribute as a nested attribute list.
func (a Attr) Attrs() ([]Attr, error) {
	l, err := ParseAttrs(a.Data)
	if err != nil {
		return nil, fmt.Errorf("nested in attribute %d: %w", a.Type, err)
	}
	return l, nil
}

// Uint8 decodes a u8 attribute.
func (a Attr) Uint8() (uint8, error) {
	if len(a.Data) != 1 {
		return 0, a.sizeError(1)
	}
	return a.Data[0], nil
}

// Uint16 decodes a host-order (little-endian) u16 attribute.
func (a Attr) Uint16() (uint16, error) {
	if len(a.Data) != 2 {
		return 0, a.sizeError(2)
	}
	return binary.LittleEndian.Uint16(a.Data), nil
}

// Uint32 decodes a host-order (little-endian) u32 attribute.
func (a Attr) Uint32() (uint32, error) {
	if len(a.Data) != 4 {
		return 0, a.sizeError(4)
	}
	return binary.LittleEndian.Uint32(a.Data), nil
}

// Uint64 decodes a host-order (little-endian) u64 attribute.
func (a Attr) Uint64() (uint64, error) {
	if len(a.Data) != 8 {
		return 0, a.sizeError(8)
	}
	return binary.LittleEndian.Uint64(a.Data), nil
}

// String decodes a string attribute; the terminating NUL, when present,
// is dropped.
func (a Attr) String() string {
	d := a.Data
	for i, c := range d {
		if c == 0 {
			d = d[:i]
			break
		}
	}
	return string(d)
}

func (a Attr) sizeError(want int) error {
	return fmt.Errorf("genl: attribute %d has %d bytes, want %d", a.Type, len(a.Data), want)
}

// maxAttrLen is the largest attribute nla_len can describe.
const maxAttrLen = 1<<16 - 1

// Encoder builds an attribute list. The zero value is ready to use.
type Encoder struct {
	b   []byte
	err error
}

// Bytes returns the encoded attributes, or the first error met (an
// attribute longer than netlink can describe).
func (e *Encoder) Bytes() ([]byte, error) { return e.b, e.err }

// header appends an attribute header for n payload bytes and returns the
// offset of the payload.
func (e *Encoder) header(typ uint16, n int) int {
	if attrHeaderLen+n > maxAttrLen && e.err == nil {
		e.err = fmt.Errorf("genl: attribute %d is %d bytes, over netlink's %d", typ&attrTypeMask, attrHeaderLen+n, maxAttrLen)
	}
	e.b = binary.LittleEndian.AppendUint16(e.b, uint16(attrHeaderLen+n))
	e.b = binary.LittleEndian.AppendUint16(e.b, typ)
	return len(e.b)
}

func (e *Encoder) pad() {
	for len(e.b)%4 != 0 {
		e.b = append(e.b, 0)
	}
}

// Raw appends an attribute holding p verbatim.
func (e *Encoder) Raw(typ uint16, p []byte) {
	e.header(typ&attrTypeMask, len(p))
	e.b = append(e.b, p...)
	e.pad()
}

// Uint8 appends a u8 attribute.
func (e *Encoder) Uint8(typ uint16, v uint8) { e.Raw(typ, []byte{v}) }

// Uint16 appends a u16 attribute in host (little-endian) order.
func (e *Encoder) Uint16(typ uint16, v uint16) {
	e.Raw(typ, binary.LittleEndian.AppendUint16(nil, v))
}

// Uint32 appends a u32 attribute in host (little-endian) order.
func (e *Encoder) Uint32(typ uint16, v uint32) {
	e.Raw(typ, binary.LittleEndian.AppendUint32(nil, v))
}

// Uint64 appends a u64 attribute in host (little-endian) order.
func (e *Encoder) Uint64(typ uint16, v uint64) {
	e.Raw(typ, binary.LittleEndian.AppendUint64(nil, v))
}

// String appends a NUL-terminated string attribute (NLA_STRING and
// NLA_NUL_STRING policies both accept it).
func (e *Encoder) String(typ uint16, s string) {
	e.header(typ&attrTypeMask, len(s)+1)
	e.b = append(e.b, s...)
	e.b = append(e.b, 0)
	e.pad()
}

// Nested appends an attribute with NLA_F_NESTED set whose payload is what
// fn encodes.
func (e *Encoder) Nested(typ uint16, fn func(*Encoder)) {
	start := len(e.b)
	e.header(typ&attrTypeMask|attrNested, 0)
	fn(e)
	n := len(e.b) - start
	if n > maxAttrLen && e.err == nil {
		e.err = fmt.Errorf("genl: nested attribute %d is %d bytes, over netlink's %d", typ&attrTypeMask, n, maxAttrLen)
	}
	binary.LittleEndian.PutUint16(e.b[start:], uint16(n))
}
