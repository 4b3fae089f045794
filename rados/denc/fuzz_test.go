package denc

import (
	"bytes"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
)

// fuzzTypes are the types FuzzSmallTypes drives; the first input byte
// picks one (modulo the length), the rest is its encoding. The order is
// fixed: the committed seed corpus depends on it.
var fuzzTypes = append(append([]struct {
	typ       string
	roundTrip func([]byte) ([]byte, error)
}{}, corpusTypes...),
	struct {
		typ       string
		roundTrip func([]byte) ([]byte, error)
	}{"eversion_t", roundTrip[EVersion]},
	struct {
		typ       string
		roundTrip func([]byte) ([]byte, error)
	}{"uuid_d", roundTrip[UUID]},
)

// checkStable asserts that what decodes re-encodes to bytes that decode
// and re-encode to the same bytes again (decode∘encode is a fixed point).
func checkStable(t *testing.T, name string, rt func([]byte) ([]byte, error), b []byte) {
	t.Helper()
	var once []byte
	var err error
	alloctest.Check(t, len(b), func() { once, err = rt(b) })
	if err != nil {
		return
	}
	twice, err := rt(once)
	if err != nil {
		t.Fatalf("%s: re-encoding of % x does not decode: %v", name, b, err)
	}
	if !bytes.Equal(once, twice) {
		t.Fatalf("%s: unstable re-encoding\nfirst  % x\nsecond % x", name, once, twice)
	}
}

func FuzzSmallTypes(f *testing.F) {
	f.Add([]byte{0, 8, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		ft := fuzzTypes[int(b[0])%len(fuzzTypes)]
		checkStable(t, ft.typ, ft.roundTrip, b[1:])
	})
}

func FuzzEntityAddr(f *testing.F) {
	f.Add(Marshal(NewEntityAddr(AddrMsgr2, mustAddrPort("127.0.0.1:3300"), 0)))
	f.Add(Marshal(NewEntityAddr(AddrLegacy, mustAddrPort("[2001:db8::1]:6789"), 77)))
	legacy := NewEncoder(nil)
	NewEntityAddr(AddrLegacy, mustAddrPort("10.0.0.1:6789"), 5).EncodeLegacy(legacy)
	f.Add(legacy.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		checkStable(t, "entity_addr_t", roundTrip[EntityAddr], b)
		a, err := Unmarshal[EntityAddr](b)
		if err != nil {
			return
		}
		s := a.String()
		if a.Type < AddrLegacy || a.Type > AddrAny || a.Family() == AFUnspec {
			return
		}
		p, err := ParseEntityAddr(s)
		if err != nil {
			t.Fatalf("String() %q does not parse: %v", s, err)
		}
		if p.Type != a.Type || p.IP != a.IP || p.Port != a.Port || p.Nonce != a.Nonce {
			t.Fatalf("String() %q parses to %#v, want %#v", s, p, a)
		}
	})
}

func FuzzEntityAddrVec(f *testing.F) {
	f.Add([]byte{2, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkStable(t, "entity_addrvec_t", roundTrip[EntityAddrVec], b)
		if v, err := Unmarshal[EntityAddrVec](b); err == nil {
			_ = v.String()
		}
	})
}

func FuzzParseEntityAddrVec(f *testing.F) {
	for _, s := range []string{"v2:127.0.0.1:3300/0", "[v2:1.2.3.4:3300/0,v1:1.2.3.4:6789/0]", "[::1]:6789", "v1:[fe80::1]:6789/99", "-", "10.0.0.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var v EntityAddrVec
		var err error
		alloctest.Check(t, len(s), func() { v, err = ParseEntityAddrVec(s) })
		if err != nil {
			return
		}
		again, err := ParseEntityAddrVec(v.String())
		if err != nil {
			t.Fatalf("%q parsed to %v, whose String() does not parse: %v", s, v, err)
		}
		if len(again) != len(v) {
			t.Fatalf("%q: %v re-parses to %v", s, v, again)
		}
		for i := range v {
			if again[i] != v[i] {
				t.Fatalf("%q: %v re-parses to %v", s, v, again)
			}
		}
	})
}
