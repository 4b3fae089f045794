package luks

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// The magic of an encrypted clone's header. librbd (Ceph 17 and later,
// luks/Magic.cc) formats a clone with a key of its own as LUKS and then
// replaces the LUKS magic of the primary header with cloneMagic, and for
// LUKS2 the secondary header's magic with cloneMagic in the secondary's
// byte order, so that no other LUKS implementation takes the clone's
// header for a volume whose data it alone describes: the clone's
// unwritten areas still read through to the parent, encrypted with the
// parent's key. Flattening the clone puts the LUKS magic back. Nothing
// else in the header changes: its checksums are of the LUKS magic.
var cloneMagic = []byte{'R', 'B', 'D', 'L', 0xba, 0xbe}

// secondaryMagic is the LUKS2 secondary header's magic.
var secondaryMagic = []byte{'S', 'K', 'U', 'L', 0xba, 0xbe}

// hasMagic reports whether b starts with the LUKS magic or cloneMagic.
func hasMagic(b []byte) bool {
	return bytes.HasPrefix(b, magic) || bytes.HasPrefix(b, cloneMagic)
}

// secondaryOrder turns a primary magic into the secondary header's
// spelling of it, and back: the first four bytes reversed, as librbd
// transforms it ("LUKS" is "SKUL", cloneMagic's "RBDL" is "LDBR").
func secondaryOrder(m []byte) []byte {
	return []byte{m[3], m[2], m[1], m[0], m[4], m[5]}
}

// MagicEdit is a change of header magic to write: New at byte Offset of
// the image.
type MagicEdit struct {
	Offset int64
	New    []byte
}

// SwapMagic returns the edits that turn the header at the start of b
// (LUKS or a clone's) into the other kind: LUKS magic into cloneMagic,
// or back, in the primary and, for LUKS2, the secondary header. b must
// hold the primary header's first bytes and, for LUKS2, the secondary's
// magic (HeaderLen bytes and six more). It returns ErrNotLUKS when b has
// neither magic and ErrCorrupt when the secondary header's magic does
// not match the primary's.
func SwapMagic(b []byte) ([]MagicEdit, error) {
	var from, to []byte
	switch {
	case len(b) < len(magic)+2:
		return nil, ErrNotLUKS
	case bytes.HasPrefix(b, magic):
		from, to = magic, cloneMagic
	case bytes.HasPrefix(b, cloneMagic):
		from, to = cloneMagic, magic
	default:
		return nil, ErrNotLUKS
	}
	edits := []MagicEdit{{Offset: 0, New: to}}
	switch v := binary.BigEndian.Uint16(b[6:]); v {
	case 1:
		// LUKS1 has no secondary header
	case 2:
		if len(b) < luks2FieldHdrSize+8 {
			return nil, fmt.Errorf("%w: LUKS2 binary header truncated at %d bytes", ErrCorrupt, len(b))
		}
		hdr := binary.BigEndian.Uint64(b[luks2FieldHdrSize:])
		if hdr < luks2MinHeader || hdr > luks2MaxHeader || uint64(len(b)) < hdr+uint64(len(magic)) {
			return nil, fmt.Errorf("%w: no secondary LUKS2 header at %d in %d bytes", ErrCorrupt, hdr, len(b))
		}
		if !bytes.Equal(b[hdr:hdr+uint64(len(magic))], secondaryOrder(from)) {
			return nil, fmt.Errorf("%w: the secondary LUKS2 header's magic does not match the primary's", ErrCorrupt)
		}
		edits = append(edits, MagicEdit{Offset: int64(hdr), New: secondaryOrder(to)})
	default:
		return nil, fmt.Errorf("%w: version %d", ErrNotLUKS, v)
	}
	return edits, nil
}

// applyMagic applies edits to b, which starts at offset 0 of the image.
func applyMagic(b []byte, edits []MagicEdit) {
	for _, e := range edits {
		copy(b[e.Offset:], e.New)
	}
}
