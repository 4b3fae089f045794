package genl

import (
	"bytes"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
)

// walk parses every attribute list reachable from b, as a reader that
// does not know which attributes are nested would try.
func walk(b []byte, depth int) {
	if depth > 8 {
		return
	}
	attrs, err := ParseAttrs(b)
	if err != nil {
		return
	}
	for _, a := range attrs {
		a.Uint8()
		a.Uint16()
		a.Uint32()
		a.Uint64()
		_ = a.String()
		walk(a.Data, depth+1)
	}
}

// FuzzParseMessages feeds datagrams as the kernel would send them to
// every decoder of this package.
func FuzzParseMessages(f *testing.F) {
	for _, s := range []string{capFamilyNlctrl, capAckNlctrl, capNoFamilyNbd, capEinval, capFamilyNlctrl + capAckNlctrl} {
		f.Add(mustHex(f, s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var msgs []Message
		var err error
		alloctest.Check(t, len(b), func() { msgs, err = ParseMessages(b) })
		if err != nil {
			return
		}
		for _, m := range msgs {
			if m.Header.Type == typeError {
				err := ParseAck(m)
				if err != nil {
					_ = err.Error()
				}
				continue
			}
			if g, err := m.Genl(); err == nil {
				walk(g.Attrs, 0)
			}
			ParseFamily(m)
		}
	})
}

// FuzzParseAttrs checks that parsing never panics and that what parses
// encodes back to the same attribute list.
func FuzzParseAttrs(f *testing.F) {
	var e Encoder
	e.Uint32(1, 3)
	e.String(10, "pvc-0123")
	e.Nested(7, func(e *Encoder) {
		e.Nested(1, func(e *Encoder) { e.Uint32(1, 5) })
	})
	seed, _ := e.Bytes()
	f.Add(seed)
	f.Add(mustHex(f, capFamilyNlctrl)[headerLen+genlHeaderLen:])
	f.Fuzz(func(t *testing.T, b []byte) {
		alloctest.Check(t, len(b), func() { walk(b, 0) })
		attrs, err := ParseAttrs(b)
		if err != nil {
			return
		}
		var e Encoder
		for _, a := range attrs {
			e.Raw(a.Type, a.Data)
		}
		out, err := e.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseAttrs(out)
		if err != nil {
			t.Fatalf("re-encoded attributes do not parse: %v", err)
		}
		if len(again) != len(attrs) {
			t.Fatalf("%d attributes became %d", len(attrs), len(again))
		}
		for i := range attrs {
			if again[i].Type != attrs[i].Type || !bytes.Equal(again[i].Data, attrs[i].Data) {
				t.Fatalf("attribute %d: %+v became %+v", i, attrs[i], again[i])
			}
		}
	})
}
