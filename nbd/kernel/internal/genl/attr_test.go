package genl

import (
	"encoding/hex"
	"strings"
	"testing"
)

// The exact bytes the kernel expects: le16 length (header included, not
// padding), le16 type, payload padded to 4; nested attributes carry
// NLA_F_NESTED (0x8000).
func TestEncoderLayout(t *testing.T) {
	var e Encoder
	e.Uint8(1, 0xab)
	e.Uint16(2, 0x1234)
	e.Uint32(3, 0xdeadbeef)
	e.Uint64(4, 0x0102030405060708)
	e.String(5, "nbd")
	e.Nested(6, func(e *Encoder) {
		e.Nested(1, func(e *Encoder) { e.Uint32(1, 7) })
		e.Nested(1, func(e *Encoder) { e.Uint32(1, 9) })
	})
	e.Raw(7, nil)
	got, err := e.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"05000100", "ab000000",
		"06000200", "34120000",
		"08000300", "efbeadde",
		"0c000400", "0807060504030201",
		"08000500", "6e626400",
		"1c000680",
		"0c000180", "08000100", "07000000",
		"0c000180", "08000100", "09000000",
		"04000700",
	}, "")
	if h := hex.EncodeToString(got); h != want {
		t.Errorf("layout\n got %s\nwant %s", h, want)
	}
}

func TestParseAttrsRoundTrip(t *testing.T) {
	var e Encoder
	e.Uint8(1, 0xab)
	e.Uint16(2, 0x1234)
	e.Uint32(3, 0xdeadbeef)
	e.Uint64(4, 0x0102030405060708)
	e.String(5, "cookie-1")
	e.Nested(6, func(e *Encoder) {
		e.Nested(1, func(e *Encoder) { e.Uint32(1, 7) })
		e.Nested(1, func(e *Encoder) { e.Uint32(1, 9) })
	})
	b, _ := e.Bytes()
	attrs, err := ParseAttrs(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(attrs) != 6 {
		t.Fatalf("%d attributes, want 6", len(attrs))
	}
	if v, err := attrs[0].Uint8(); v != 0xab || err != nil {
		t.Errorf("u8 %#x %v", v, err)
	}
	if v, err := attrs[1].Uint16(); v != 0x1234 || err != nil {
		t.Errorf("u16 %#x %v", v, err)
	}
	if v, err := attrs[2].Uint32(); v != 0xdeadbeef || err != nil {
		t.Errorf("u32 %#x %v", v, err)
	}
	if v, err := attrs[3].Uint64(); v != 0x0102030405060708 || err != nil {
		t.Errorf("u64 %#x %v", v, err)
	}
	if s := attrs[4].String(); s != "cookie-1" {
		t.Errorf("string %q", s)
	}
	if !attrs[5].Nested || attrs[5].Type != 6 {
		t.Errorf("nested attribute %+v", attrs[5])
	}
	items, err := attrs[5].Attrs()
	if err != nil || len(items) != 2 {
		t.Fatalf("items %v %v", items, err)
	}
	for i, want := range []uint32{7, 9} {
		f, err := items[i].Attrs()
		if err != nil || len(f) != 1 {
			t.Fatalf("item %d: %v %v", i, f, err)
		}
		if v, _ := f[0].Uint32(); v != want || f[0].Type != 1 {
			t.Errorf("item %d: %+v", i, f[0])
		}
	}
	// Wrong widths are errors, not truncations.
	if _, err := attrs[2].Uint64(); err == nil {
		t.Error("u32 attribute read as u64")
	}
	if _, err := attrs[3].Uint8(); err == nil {
		t.Error("u64 attribute read as u8")
	}
}

func TestParseAttrsMalformed(t *testing.T) {
	for _, tc := range []struct{ name, hex string }{
		{"length past the end", "0c000100aabbccdd"},
		{"length under the header", "02000100"},
		{"stray bytes", "08000100aabbccdd0102"},
		{"nested garbage", "0c000680ff000100aabbccdd"},
	} {
		b, _ := hex.DecodeString(tc.hex)
		attrs, err := ParseAttrs(b)
		if err == nil && len(attrs) == 1 {
			_, err = attrs[0].Attrs()
		}
		if err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	// Trailing zero padding is fine (the last attribute's own padding
	// may be cut by the sender's length).
	b, _ := hex.DecodeString("05000100ab000000" + "0000")
	if attrs, err := ParseAttrs(b); err != nil || len(attrs) != 1 {
		t.Errorf("padding: %v %v", attrs, err)
	}
	// An unpadded last attribute is accepted.
	b, _ = hex.DecodeString("05000100ab")
	if attrs, err := ParseAttrs(b); err != nil || len(attrs) != 1 {
		t.Errorf("unpadded: %v %v", attrs, err)
	}
}

func TestEncoderTooLong(t *testing.T) {
	var e Encoder
	e.Raw(1, make([]byte, 1<<16))
	if _, err := e.Bytes(); err == nil {
		t.Error("64 KiB attribute encoded without error")
	}
	var n Encoder
	n.Nested(1, func(e *Encoder) {
		for range 3 {
			e.Raw(2, make([]byte, 30000))
		}
	})
	if _, err := n.Bytes(); err == nil {
		t.Error("oversized nest encoded without error")
	}
}
