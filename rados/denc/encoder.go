package denc

import (
	"encoding/binary"
	"math"
)

// Encoder appends Ceph encodings to a byte slice. The zero value is ready
// to use; B holds the bytes written so far.
type Encoder struct {
	B []byte
}

// NewEncoder returns an encoder that appends to buf (which may be nil or a
// pooled buffer with spare capacity).
func NewEncoder(buf []byte) *Encoder { return &Encoder{B: buf} }

// Bytes returns the encoded bytes.
func (e *Encoder) Bytes() []byte { return e.B }

// Len returns the number of bytes encoded.
func (e *Encoder) Len() int { return len(e.B) }

// U8 appends one byte.
func (e *Encoder) U8(v uint8) { e.B = append(e.B, v) }

// Bool appends a boolean as one byte.
func (e *Encoder) Bool(v bool) {
	if v {
		e.U8(1)
	} else {
		e.U8(0)
	}
}

// U16 appends a little-endian uint16.
func (e *Encoder) U16(v uint16) { e.B = binary.LittleEndian.AppendUint16(e.B, v) }

// U32 appends a little-endian uint32.
func (e *Encoder) U32(v uint32) { e.B = binary.LittleEndian.AppendUint32(e.B, v) }

// U64 appends a little-endian uint64.
func (e *Encoder) U64(v uint64) { e.B = binary.LittleEndian.AppendUint64(e.B, v) }

// I8 appends a signed byte.
func (e *Encoder) I8(v int8) { e.U8(uint8(v)) }

// I16 appends a little-endian int16.
func (e *Encoder) I16(v int16) { e.U16(uint16(v)) }

// I32 appends a little-endian int32.
func (e *Encoder) I32(v int32) { e.U32(uint32(v)) }

// I64 appends a little-endian int64.
func (e *Encoder) I64(v int64) { e.U64(uint64(v)) }

// F64 appends a little-endian IEEE-754 double.
func (e *Encoder) F64(v float64) { e.U64(math.Float64bits(v)) }

// Raw appends p as is.
func (e *Encoder) Raw(p []byte) { e.B = append(e.B, p...) }

// Blob appends a uint32 length and p.
func (e *Encoder) Blob(p []byte) {
	e.U32(uint32(len(p)))
	e.B = append(e.B, p...)
}

// String appends a uint32 length and s.
func (e *Encoder) String(s string) {
	e.U32(uint32(len(s)))
	e.B = append(e.B, s...)
}

// Versioned appends a struct envelope (version, compat, length) around
// whatever body encodes, patching the length afterwards.
func (e *Encoder) Versioned(version, compat uint8, body func(e *Encoder)) {
	e.U8(version)
	e.U8(compat)
	at := len(e.B)
	e.U32(0)
	body(e)
	binary.LittleEndian.PutUint32(e.B[at:], uint32(len(e.B)-at-4))
}
