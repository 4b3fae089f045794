package denc

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
)

func TestEntityAddrStringParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want EntityAddr
		out  string // String() of the result when it differs from in
	}{
		{in: "v2:127.0.0.1:3300/0", want: NewEntityAddr(AddrMsgr2, netip.MustParseAddrPort("127.0.0.1:3300"), 0)},
		{in: "v1:10.1.2.3:6789/12345", want: NewEntityAddr(AddrLegacy, netip.MustParseAddrPort("10.1.2.3:6789"), 12345)},
		{in: "v2:[::1]:3300/7", want: NewEntityAddr(AddrMsgr2, netip.MustParseAddrPort("[::1]:3300"), 7)},
		{in: "v2:[fe80::1:2]:3300/0", want: NewEntityAddr(AddrMsgr2, netip.MustParseAddrPort("[fe80::1:2]:3300"), 0)},
		{in: "1.2.3.4:3300/9", want: NewEntityAddr(AddrAny, netip.MustParseAddrPort("1.2.3.4:3300"), 9)},
		{in: "any:1.2.3.4:3300/9", want: NewEntityAddr(AddrAny, netip.MustParseAddrPort("1.2.3.4:3300"), 9), out: "1.2.3.4:3300/9"},
		{in: "1.2.3.4", want: EntityAddr{Type: AddrAny, IP: netip.MustParseAddr("1.2.3.4")}, out: "1.2.3.4:0/0"},
		{in: "::1", want: EntityAddr{Type: AddrAny, IP: netip.MustParseAddr("::1")}, out: "[::1]:0/0"},
		{in: "-", want: EntityAddr{}},
	} {
		got, err := ParseEntityAddr(tc.in)
		if err != nil {
			t.Errorf("ParseEntityAddr(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseEntityAddr(%q) = %#v, want %#v", tc.in, got, tc.want)
		}
		out := tc.out
		if out == "" {
			out = tc.in
		}
		if s := got.String(); s != out {
			t.Errorf("String() = %q, want %q", s, out)
		}
	}
	for _, bad := range []string{"", "v2:", "v2:1.2.3", "v2:1.2.3.4:99999/0", "v2:1.2.3.4:3300/x", "v2:[::1:3300/0", "v2:1.2.3.4:3300/0junk"} {
		if a, err := ParseEntityAddr(bad); err == nil {
			t.Errorf("ParseEntityAddr(%q) = %v, want error", bad, a)
		}
	}
}

func TestEntityAddrVecStringParse(t *testing.T) {
	in := "[v2:127.0.0.1:3300/0,v1:127.0.0.1:6789/0]"
	v, err := ParseEntityAddrVec(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 2 || v[0].Type != AddrMsgr2 || v[1].Type != AddrLegacy || v[1].Port != 6789 {
		t.Fatalf("parsed %#v", v)
	}
	if v.String() != in {
		t.Errorf("String() = %q", v.String())
	}
	if a, ok := v.Msgr2(); !ok || a.Port != 3300 {
		t.Errorf("Msgr2() = %v, %v", a, ok)
	}
	if a := v.LegacyOrFront(); a.Port != 6789 {
		t.Errorf("LegacyOrFront() = %v", a)
	}
	one, err := ParseEntityAddrVec("[::1]:3300/0")
	if err != nil || len(one) != 1 || !one[0].IP.Is6() {
		t.Errorf("bracketed IPv6 = %v, %v", one, err)
	}
	for _, bad := range []string{"[v2:1.2.3.4:3300/0", "[v2:1.2.3.4:3300/0;v1:1.2.3.4:6789/0]", "[]"} {
		if v, err := ParseEntityAddrVec(bad); err == nil {
			t.Errorf("ParseEntityAddrVec(%q) = %v, want error", bad, v)
		}
	}
}

// TestEntityAddrEncodings checks both wire forms of IPv4 and IPv6
// addresses byte by byte and that each decodes back.
func TestEntityAddrEncodings(t *testing.T) {
	v4 := NewEntityAddr(AddrMsgr2, netip.MustParseAddrPort("127.0.0.1:3300"), 0x01020304)
	want := []byte{
		1,                   // marker
		1, 1, 0x1c, 0, 0, 0, // envelope: v1 compat1 len 28
		2, 0, 0, 0, // type v2
		4, 3, 2, 1, // nonce
		16, 0, 0, 0, // sockaddr length
		2, 0, // family AF_INET, little-endian
		0x0c, 0xe4, // port 3300, big-endian
		127, 0, 0, 1,
		0, 0, 0, 0, 0, 0, 0, 0, // sin_zero
	}
	if got := Marshal(v4); !bytes.Equal(got, want) {
		t.Errorf("IPv4 encoding\n got % x\nwant % x", got, want)
	}

	v6 := NewEntityAddr(AddrLegacy, netip.MustParseAddrPort("[2001:db8::5]:6789"), 42)
	v6.ScopeID = 3
	v6.FlowInfo = 0x11223344
	b := Marshal(v6)
	if len(b) != 1+6+12+28 || b[19] != 10 || b[20] != 0 || b[21] != 0x1a || b[22] != 0x85 {
		t.Errorf("IPv6 encoding % x", b)
	}
	got, err := Unmarshal[EntityAddr](b)
	if err != nil || got != v6 {
		t.Errorf("IPv6 round trip = %#v, %v", got, err)
	}

	for _, a := range []EntityAddr{v4, v6, {}} {
		e := NewEncoder(nil)
		a.EncodeLegacy(e)
		if e.Len() != 136 {
			t.Fatalf("legacy encoding is %d bytes, want 136", e.Len())
		}
		if fam := uint16(e.B[8])<<8 | uint16(e.B[9]); fam != a.Family() {
			t.Errorf("legacy family %d (big-endian on the wire), want %d", fam, a.Family())
		}
		back, err := Unmarshal[EntityAddr](e.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		wantBack := a
		wantBack.Type = AddrLegacy // the legacy form has no type
		if back != wantBack {
			t.Errorf("legacy round trip %#v, want %#v", back, wantBack)
		}
		// The legacy form is also a valid entity_addrvec_t.
		vec, err := Unmarshal[EntityAddrVec](e.Bytes())
		if err != nil || len(vec) != 1 || vec[0] != wantBack {
			t.Errorf("legacy addrvec = %v, %v", vec, err)
		}
	}

	// A single modern address is a valid entity_addrvec_t too.
	vec, err := Unmarshal[EntityAddrVec](Marshal(v4))
	if err != nil || len(vec) != 1 || vec[0] != v4 {
		t.Errorf("marker-1 addrvec = %v, %v", vec, err)
	}
}

func TestEntityAddrRejects(t *testing.T) {
	good := Marshal(NewEntityAddr(AddrMsgr2, netip.MustParseAddrPort("127.0.0.1:3300"), 0))
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for name, b := range map[string][]byte{
		"bad marker":     mutate(func(b []byte) []byte { b[0] = 7; return b }),
		"compat 2":       mutate(func(b []byte) []byte { b[2] = 2; return b }),
		"elen too long":  mutate(func(b []byte) []byte { b[15] = 17; return b }),
		"elen 1":         mutate(func(b []byte) []byte { b[15] = 1; return b }),
		"unknown family": mutate(func(b []byte) []byte { b[19] = 1; return b }),
		"truncated":      good[:len(good)-1],
		"empty":          nil,
	} {
		if _, err := Unmarshal[EntityAddr](b); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	_, err := Unmarshal[EntityAddr](good[:10])
	if !errors.Is(err, ErrShort) {
		t.Errorf("truncated: %v, want ErrShort", err)
	}
}

func TestEntityAddrCompare(t *testing.T) {
	a := NewEntityAddr(AddrLegacy, netip.MustParseAddrPort("10.0.0.1:6789"), 0)
	b := NewEntityAddr(AddrLegacy, netip.MustParseAddrPort("10.0.0.2:6789"), 0)
	c := NewEntityAddr(AddrMsgr2, netip.MustParseAddrPort("10.0.0.1:6789"), 0)
	if a.Compare(b) >= 0 || b.Compare(a) <= 0 || a.Compare(a) != 0 || c.Compare(a) <= 0 {
		t.Errorf("Compare order wrong")
	}
}

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// TestParseEntityAddrVecAllocations holds ParseEntityAddrVec to the fuzz
// targets' allocation bound on the inputs that once broke it: many short
// addresses (append's doubling), and long invalid input quoted by nested
// errors.
func TestParseEntityAddrVecAllocations(t *testing.T) {
	many := "[" + strings.Repeat("::,", MaxParsedAddrs-1) + "::]"
	for name, s := range map[string]string{
		"many short":       many,
		"too many":         "[" + strings.Repeat("::,", 1200) + "::]",
		"bad after many":   "[" + strings.Repeat("::,", 1200) + strings.Repeat("\xff", 2000),
		"bad binary first": "[" + strings.Repeat("\x00\xff", 2000),
		"unterminated":     many[:len(many)-1] + "," + strings.Repeat("v2:", 500),
	} {
		t.Run(name, func(t *testing.T) {
			alloctest.Check(t, len(s), func() { _, _ = ParseEntityAddrVec(s) })
		})
	}
	v, err := ParseEntityAddrVec(many)
	if err != nil || len(v) != MaxParsedAddrs || cap(v) != MaxParsedAddrs {
		t.Fatalf("ParseEntityAddrVec(%d addresses) = len %d cap %d, %v", MaxParsedAddrs, len(v), cap(v), err)
	}
	if _, err := ParseEntityAddrVec(many[:len(many)-1] + ",::]"); err == nil || !strings.Contains(err.Error(), "more than 64 addresses") {
		t.Fatalf("ParseEntityAddrVec(%d addresses): %v, want an error naming the bound", MaxParsedAddrs+1, err)
	}
}
