package denc

import "fmt"

// VersionedLegacy reads a struct envelope that may predate the compat
// byte and the length field, as Ceph's DECODE_START_LEGACY_COMPAT_LEN
// macros do. The u8 version comes first; a compat byte follows only when
// version >= compatSince (otherwise skipV padding bytes are skipped: 1 for
// structs whose oldest encodings used a u16 version); a u32 length follows
// only when version >= lenSince. maxCompat is the newest compat version
// this decoder understands.
//
// With a length, body gets a decoder limited to the struct's bytes and any
// bytes it leaves unread are skipped, as in Versioned. Without one, body
// reads straight from d and must consume exactly the struct. The returned
// version is 0 on error.
func (d *Decoder) VersionedLegacy(what string, maxCompat, compatSince, lenSince uint8, skipV int,
	body func(d *Decoder, version uint8)) uint8 {
	v := d.U8(what + " version")
	if d.err != nil {
		return 0
	}
	if v >= compatSince {
		c := d.U8(what + " compat")
		if d.err == nil && c > maxCompat {
			d.Fail(what, fmt.Errorf("%w: compat %d (version %d), understood up to %d", ErrTooNew, c, v, maxCompat))
		}
	} else if skipV > 0 {
		d.Skip(what+" legacy version", skipV)
	}
	if d.err != nil {
		return 0
	}
	if v < lenSince {
		body(d, v)
		if d.err != nil {
			return 0
		}
		return v
	}
	n := d.U32(what + " length")
	if d.err != nil {
		return 0
	}
	if uint64(n) > uint64(len(d.b)-d.off) {
		d.Fail(what, fmt.Errorf("%w: struct length %d exceeds remaining %d bytes", ErrShort, n, len(d.b)-d.off))
		return 0
	}
	sub := d.Sub(what, int(n))
	body(sub, v)
	d.Adopt(sub)
	if d.err != nil {
		return 0
	}
	return v
}
