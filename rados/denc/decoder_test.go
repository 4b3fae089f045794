package denc

import (
	"bytes"
	"errors"
	"math"
	"runtime"
	"testing"
)

// TestPrimitivesRoundTrip encodes one of everything and decodes it back.
func TestPrimitivesRoundTrip(t *testing.T) {
	e := NewEncoder(nil)
	e.U8(0xfe)
	e.Bool(true)
	e.Bool(false)
	e.U16(0xbeef)
	e.U32(0xdeadbeef)
	e.U64(0x0123456789abcdef)
	e.I8(-2)
	e.I16(-300)
	e.I32(-70000)
	e.I64(math.MinInt64)
	e.F64(3.25)
	e.Blob([]byte{1, 2, 3})
	e.String("héllo")
	e.Raw([]byte{9, 9})
	PutList(e, []uint32{7, 8}, func(e *Encoder, v uint32) { e.U32(v) })
	PutMap(e, map[string]uint16{"a": 1, "b": 2}, []string{"a", "b"}, func(e *Encoder, k string, v uint16) {
		e.String(k)
		e.U16(v)
	})

	// Little-endian on the wire.
	if !bytes.Equal(e.B[3:5], []byte{0xef, 0xbe}) {
		t.Errorf("u16 bytes % x", e.B[3:5])
	}

	d := NewDecoder(e.Bytes())
	if v := d.U8("u8"); v != 0xfe {
		t.Errorf("u8 %x", v)
	}
	if !d.Bool("t") || d.Bool("f") {
		t.Error("bools")
	}
	if v := d.U16("u16"); v != 0xbeef {
		t.Errorf("u16 %x", v)
	}
	if v := d.U32("u32"); v != 0xdeadbeef {
		t.Errorf("u32 %x", v)
	}
	if v := d.U64("u64"); v != 0x0123456789abcdef {
		t.Errorf("u64 %x", v)
	}
	if d.I8("i8") != -2 || d.I16("i16") != -300 || d.I32("i32") != -70000 || d.I64("i64") != math.MinInt64 {
		t.Error("signed")
	}
	if v := d.F64("f64"); v != 3.25 {
		t.Errorf("f64 %v", v)
	}
	if v := d.BlobCopy("blob"); !bytes.Equal(v, []byte{1, 2, 3}) {
		t.Errorf("blob %v", v)
	}
	if v := d.String("string"); v != "héllo" {
		t.Errorf("string %q", v)
	}
	if v := d.Raw("raw", 2); !bytes.Equal(v, []byte{9, 9}) {
		t.Errorf("raw %v", v)
	}
	l := List(d, "list", 4, func(d *Decoder) uint32 { return d.U32("elem") })
	if len(l) != 2 || l[0] != 7 || l[1] != 8 {
		t.Errorf("list %v", l)
	}
	m := Map(d, "map", 6, func(d *Decoder) (string, uint16) { return d.String("k"), d.U16("v") })
	if len(m) != 2 || m["a"] != 1 || m["b"] != 2 {
		t.Errorf("map %v", m)
	}
	d.End("end")
	if err := d.Err(); err != nil {
		t.Fatal(err)
	}
	if d.Remaining() != 0 || d.Offset() != e.Len() {
		t.Errorf("remaining %d offset %d", d.Remaining(), d.Offset())
	}
}

func TestOptional(t *testing.T) {
	d := NewDecoder([]byte{1, 5, 0, 0, 0, 0})
	v, ok := Optional(d, "opt", func(d *Decoder) uint32 { return d.U32("v") })
	if !ok || v != 5 {
		t.Errorf("present: %v %v", v, ok)
	}
	v, ok = Optional(d, "opt", func(d *Decoder) uint32 { return d.U32("v") })
	if ok || v != 0 || d.Err() != nil {
		t.Errorf("absent: %v %v %v", v, ok, d.Err())
	}
}

// TestVersionedSkipsNewerFields: a newer peer's struct (version 3, compat
// 1) with fields this decoder does not know is read up to what it knows,
// the rest skipped, and decoding continues after the struct.
func TestVersionedSkipsNewerFields(t *testing.T) {
	e := NewEncoder(nil)
	e.Versioned(3, 1, func(e *Encoder) {
		e.U32(42)
		e.String("added in v2")
		e.U64(7) // added in v3
	})
	e.U16(0x1234) // next field after the struct
	if got := e.B[2:6]; !bytes.Equal(got, []byte{4 + 4 + 11 + 8, 0, 0, 0}) {
		t.Errorf("length field % x", got)
	}

	d := NewDecoder(e.Bytes())
	var first uint32
	v := d.Versioned("thing", 1, func(d *Decoder, v uint8) { first = d.U32("first") })
	if v != 3 || first != 42 {
		t.Errorf("version %d first %d", v, first)
	}
	if next := d.U16("next"); next != 0x1234 || d.Err() != nil {
		t.Errorf("after struct: %x %v", next, d.Err())
	}
}

func TestVersionedRejects(t *testing.T) {
	e := NewEncoder(nil)
	e.Versioned(5, 4, func(e *Encoder) { e.U32(1) })
	d := NewDecoder(e.Bytes())
	called := false
	if v := d.Versioned("thing", 3, func(*Decoder, uint8) { called = true }); v != 0 || called {
		t.Errorf("too new: version %d, body called %v", v, called)
	}
	if !errors.Is(d.Err(), ErrTooNew) {
		t.Errorf("too new: %v", d.Err())
	}
	var de *Error
	if !errors.As(d.Err(), &de) || de.What != "thing" {
		t.Errorf("error %#v", d.Err())
	}

	// A length beyond the input.
	d = NewDecoder([]byte{1, 1, 100, 0, 0, 0, 1, 2})
	d.Versioned("thing", 1, func(*Decoder, uint8) { t.Error("body called") })
	if !errors.Is(d.Err(), ErrShort) {
		t.Errorf("long length: %v", d.Err())
	}

	// A body reading past the struct's length fails, even though more
	// input follows the struct.
	d = NewDecoder([]byte{1, 1, 2, 0, 0, 0, 1, 2, 3, 4, 5, 6})
	d.Versioned("thing", 1, func(d *Decoder, _ uint8) { d.U32("too far") })
	if !errors.Is(d.Err(), ErrShort) {
		t.Errorf("overrun: %v", d.Err())
	}
}

func TestVersionedLegacy(t *testing.T) {
	// Version 1: no compat byte, no length; body reads from the stream.
	d := NewDecoder([]byte{1, 0xaa, 0xbb})
	var got uint8
	v := d.VersionedLegacy("old", 3, 2, 3, 0, func(d *Decoder, _ uint8) { got = d.U8("x") })
	if v != 1 || got != 0xaa || d.U8("next") != 0xbb || d.Err() != nil {
		t.Errorf("v1: %d %x %v", v, got, d.Err())
	}
	// Version 2 of a struct with skipV 1 (a u16 version): skip the high
	// byte, then compat is absent, length absent.
	d = NewDecoder([]byte{2, 0, 0xcc})
	v = d.VersionedLegacy("old16", 3, 3, 3, 1, func(d *Decoder, _ uint8) { got = d.U8("x") })
	if v != 2 || got != 0xcc || d.Err() != nil {
		t.Errorf("u16 version: %d %x %v", v, got, d.Err())
	}
	// Version 2 with compat but no length.
	d = NewDecoder([]byte{2, 1, 0xdd})
	v = d.VersionedLegacy("mid", 3, 2, 3, 0, func(d *Decoder, _ uint8) { got = d.U8("x") })
	if v != 2 || got != 0xdd || d.Err() != nil {
		t.Errorf("compat only: %d %x %v", v, got, d.Err())
	}
	// Modern form: behaves as Versioned, skipping unknown bytes.
	d = NewDecoder([]byte{4, 3, 2, 0, 0, 0, 0xee, 0xff, 0x11})
	v = d.VersionedLegacy("new", 3, 2, 3, 0, func(d *Decoder, _ uint8) { got = d.U8("x") })
	if v != 4 || got != 0xee || d.U8("next") != 0x11 || d.Err() != nil {
		t.Errorf("modern: %d %x %v", v, got, d.Err())
	}
	// Too-new compat.
	d = NewDecoder([]byte{9, 9, 0, 0, 0, 0})
	d.VersionedLegacy("new", 3, 2, 3, 0, func(*Decoder, uint8) { t.Error("body called") })
	if !errors.Is(d.Err(), ErrTooNew) {
		t.Errorf("too new: %v", d.Err())
	}
}

// TestCountRefusesAbsurdCounts: counts that the remaining input cannot
// hold fail before anything is allocated.
func TestCountRefusesAbsurdCounts(t *testing.T) {
	d := NewDecoder([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
	if n := d.Count("count", 1); n != 0 || !errors.Is(d.Err(), ErrShort) {
		t.Errorf("count %d, err %v", n, d.Err())
	}
	// Exactly enough is fine; one element too many is not.
	d = NewDecoder([]byte{2, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	if n := d.Count("count", 4); n != 2 || d.Err() != nil {
		t.Errorf("exact: %d %v", n, d.Err())
	}
	d = NewDecoder([]byte{3, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	if n := d.Count("count", 4); n != 0 || d.Err() == nil {
		t.Errorf("one too many: %d %v", n, d.Err())
	}
	// A huge blob length.
	d = NewDecoder([]byte{0xff, 0xff, 0xff, 0x7f, 'x'})
	if b := d.Blob("blob"); b != nil || !errors.Is(d.Err(), ErrShort) {
		t.Errorf("blob %v %v", b, d.Err())
	}
	// Lists and maps refuse before allocating their elements.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d = NewDecoder([]byte{0xff, 0xff, 0xff, 0xff})
	_ = List(d, "list", 8, func(d *Decoder) uint64 { return d.U64("x") })
	d = NewDecoder([]byte{0xff, 0xff, 0xff, 0xff})
	_ = Map(d, "map", 8, func(d *Decoder) (uint32, uint32) { return d.U32("k"), d.U32("v") })
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<16 {
		t.Errorf("%d bytes allocated refusing absurd counts", n)
	}
}

// TestStickyErrors: after the first failure every read returns zero and
// Err keeps the first error.
func TestStickyErrors(t *testing.T) {
	d := NewDecoder([]byte{1, 2, 3})
	if v := d.U32("first"); v != 0 {
		t.Errorf("short read returned %d", v)
	}
	first := d.Err()
	var de *Error
	if !errors.As(first, &de) || de.What != "first" || de.Off != 0 || !errors.Is(first, ErrShort) {
		t.Fatalf("first error %#v", first)
	}
	if d.U8("second") != 0 || d.String("third") != "" || d.Raw("fourth", 1) != nil || d.Remaining() != 0 || d.Rest() != nil {
		t.Error("reads after an error returned data")
	}
	d.Fail("later", ErrInvalid)
	d.Failf("later", "also %d", 1)
	if d.Err() != first {
		t.Errorf("error replaced: %v", d.Err())
	}
	if d.Versioned("v", 9, func(*Decoder, uint8) { t.Error("body called after error") }) != 0 {
		t.Error("Versioned after error returned a version")
	}
	if l := List(d, "l", 1, func(d *Decoder) uint8 { return d.U8("x") }); l != nil {
		t.Error("List after error")
	}
	if m := Map(d, "m", 1, func(d *Decoder) (uint8, uint8) { return 0, 0 }); m != nil {
		t.Error("Map after error")
	}

	// Errors inside a sub-decoder reach the parent.
	d = NewDecoder([]byte{1, 2, 3, 4})
	sub := d.Sub("sub", 2)
	sub.U32("too long")
	d.Adopt(sub)
	if !errors.Is(d.Err(), ErrShort) {
		t.Errorf("adopted %v", d.Err())
	}
}

func TestEnd(t *testing.T) {
	d := NewDecoder([]byte{1, 2})
	d.U8("one")
	d.End("trailing")
	if !errors.Is(d.Err(), ErrInvalid) {
		t.Errorf("End with a byte left: %v", d.Err())
	}
	if _, err := Unmarshal[UTime](make([]byte, 9)); err == nil {
		t.Error("Unmarshal accepted a trailing byte")
	}
}

func TestEncoderReusesBuffer(t *testing.T) {
	buf := make([]byte, 0, 64)
	e := NewEncoder(buf)
	e.Versioned(1, 1, func(e *Encoder) {
		e.Versioned(2, 1, func(e *Encoder) { e.U16(5) })
	})
	want := []byte{1, 1, 8, 0, 0, 0, 2, 1, 2, 0, 0, 0, 5, 0}
	if !bytes.Equal(e.Bytes(), want) {
		t.Errorf("nested envelopes % x, want % x", e.Bytes(), want)
	}
	if &e.Bytes()[0] != &buf[:1][0] {
		t.Error("encoder did not append to the given buffer")
	}
}
