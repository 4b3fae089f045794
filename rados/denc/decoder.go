// Package denc implements Ceph's little-endian wire encoding: fixed-width
// integers, length-prefixed strings and blobs, lists and maps, and the
// versioned struct envelope (version, compat version, length) that lets old
// decoders skip fields added by newer peers. It also holds the small common
// types that every layer above shares (entity names and addresses, utime,
// uuid, object locators, placement-group ids, snap contexts).
//
// Decoding never panics and never allocates more than the input could
// describe: every count is checked against the bytes that remain before any
// slice is made. Errors are sticky: after the first failure every read
// returns a zero value and Err reports the first error, so long struct
// decoders read straight through and check once.
package denc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrShort is wrapped by every error caused by input ending early.
var ErrShort = errors.New("denc: input too short")

// ErrTooNew is wrapped when a struct's compat version says this decoder
// cannot understand it.
var ErrTooNew = errors.New("denc: struct compat version too new")

// ErrInvalid is wrapped when a value is structurally impossible (absurd
// counts, bad lengths, unknown enum values that cannot be skipped).
var ErrInvalid = errors.New("denc: invalid encoding")

// Error describes where decoding failed.
type Error struct {
	What string // the field or struct being decoded
	Off  int    // offset in the decoder's input
	Err  error  // ErrShort, ErrTooNew, ErrInvalid or a more specific error
}

func (e *Error) Error() string {
	return fmt.Sprintf("denc: decoding %s at offset %d: %v", e.What, e.Off, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Decoder reads Ceph encodings from a byte slice.
type Decoder struct {
	b   []byte
	off int
	err error
}

// NewDecoder returns a decoder over b. The decoder does not copy b; byte
// slices it returns from Raw alias b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Err returns the first error encountered, or nil.
func (d *Decoder) Err() error { return d.err }

// Offset returns the number of bytes consumed.
func (d *Decoder) Offset() int { return d.off }

// Remaining returns the number of unread bytes.
func (d *Decoder) Remaining() int {
	if d.err != nil {
		return 0
	}
	return len(d.b) - d.off
}

// Rest returns the unread bytes without consuming them.
func (d *Decoder) Rest() []byte {
	if d.err != nil {
		return nil
	}
	return d.b[d.off:]
}

// Fail records err (wrapped with what and the current offset) unless an
// error is already recorded. Decoders of composite types use it to report
// semantic problems.
func (d *Decoder) Fail(what string, err error) {
	if d.err == nil {
		d.err = &Error{What: what, Off: d.off, Err: err}
	}
}

// Failf records an ErrInvalid error with a formatted detail.
func (d *Decoder) Failf(what, format string, args ...any) {
	d.Fail(what, fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...)))
}

// take consumes n bytes, or records ErrShort.
func (d *Decoder) take(what string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.off {
		d.Fail(what, fmt.Errorf("%w: need %d bytes, have %d", ErrShort, n, len(d.b)-d.off))
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

// Skip consumes n bytes.
func (d *Decoder) Skip(what string, n int) { d.take(what, n) }

// Raw consumes n bytes and returns them without copying.
func (d *Decoder) Raw(what string, n int) []byte { return d.take(what, n) }

// U8 reads one byte.
func (d *Decoder) U8(what string) uint8 {
	p := d.take(what, 1)
	if p == nil {
		return 0
	}
	return p[0]
}

// Bool reads one byte as a boolean (any non-zero value is true).
func (d *Decoder) Bool(what string) bool { return d.U8(what) != 0 }

// U16 reads a little-endian uint16.
func (d *Decoder) U16(what string) uint16 {
	p := d.take(what, 2)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint16(p)
}

// U32 reads a little-endian uint32.
func (d *Decoder) U32(what string) uint32 {
	p := d.take(what, 4)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(p)
}

// U64 reads a little-endian uint64.
func (d *Decoder) U64(what string) uint64 {
	p := d.take(what, 8)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(p)
}

// I8 reads a signed byte.
func (d *Decoder) I8(what string) int8 { return int8(d.U8(what)) }

// I16 reads a little-endian int16.
func (d *Decoder) I16(what string) int16 { return int16(d.U16(what)) }

// I32 reads a little-endian int32.
func (d *Decoder) I32(what string) int32 { return int32(d.U32(what)) }

// I64 reads a little-endian int64.
func (d *Decoder) I64(what string) int64 { return int64(d.U64(what)) }

// F64 reads a little-endian IEEE-754 double.
func (d *Decoder) F64(what string) float64 { return math.Float64frombits(d.U64(what)) }

// Count reads a uint32 element count and checks that count elements of at
// least minElemSize bytes each could fit in the remaining input, so callers
// may allocate count elements safely. minElemSize 0 is treated as 1.
func (d *Decoder) Count(what string, minElemSize int) int {
	n := d.U32(what)
	if d.err != nil {
		return 0
	}
	if minElemSize < 1 {
		minElemSize = 1
	}
	if uint64(n)*uint64(minElemSize) > uint64(len(d.b)-d.off) {
		d.Fail(what, fmt.Errorf("%w: count %d of >= %d-byte elements exceeds remaining %d bytes",
			ErrShort, n, minElemSize, len(d.b)-d.off))
		return 0
	}
	return int(n)
}

// Blob reads a uint32-length-prefixed byte string without copying.
func (d *Decoder) Blob(what string) []byte {
	n := d.Count(what, 1)
	return d.take(what, n)
}

// BlobCopy reads a uint32-length-prefixed byte string into fresh memory.
func (d *Decoder) BlobCopy(what string) []byte {
	p := d.Blob(what)
	if p == nil {
		return nil
	}
	return append([]byte(nil), p...)
}

// String reads a uint32-length-prefixed string.
func (d *Decoder) String(what string) string { return string(d.Blob(what)) }

// Sub returns a decoder over the next n bytes and consumes them from d.
// Errors in the sub-decoder must be propagated with Adopt.
func (d *Decoder) Sub(what string, n int) *Decoder {
	p := d.take(what, n)
	s := &Decoder{b: p}
	if d.err != nil {
		s.err = d.err
	}
	return s
}

// Adopt records sub's error in d, if d has none yet. The recorded offset
// is translated into d's coordinates only approximately (sub's own offset
// is kept in the inner error).
func (d *Decoder) Adopt(sub *Decoder) {
	if d.err == nil && sub.err != nil {
		d.err = sub.err
	}
}

// Versioned reads a struct envelope (u8 version, u8 compat, u32 length),
// checks compat against maxCompat (the newest compat version this decoder
// understands) and calls body with a decoder limited to the struct's bytes.
// Bytes body leaves unread (fields from newer versions) are skipped. The
// returned version is 0 on error.
func (d *Decoder) Versioned(what string, maxCompat uint8, body func(d *Decoder, version uint8)) uint8 {
	v := d.U8(what + " version")
	c := d.U8(what + " compat")
	n := d.U32(what + " length")
	if d.err != nil {
		return 0
	}
	if c > maxCompat {
		d.Fail(what, fmt.Errorf("%w: compat %d (version %d), understood up to %d", ErrTooNew, c, v, maxCompat))
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

// End records an ErrInvalid error if any input remains unread. Decoders of
// whole messages or files call it last.
func (d *Decoder) End(what string) {
	if d.err == nil && d.off != len(d.b) {
		d.Failf(what, "%d unread bytes", len(d.b)-d.off)
	}
}
