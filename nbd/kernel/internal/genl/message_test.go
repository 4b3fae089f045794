package genl

import (
	"encoding/hex"
	"errors"
	"syscall"
	"testing"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Captured from Linux 6.18 (the test host): CTRL_CMD_GETFAMILY "nlctrl",
// its reply, and the acknowledgement that came in a datagram of its own.
const (
	capGetFamilyNlctrl = "20000000100005003c07438500000000030200000b0002006e6c6374726c0000"
	capFamilyNlctrl    = "88000000100000003c07438511610000010200000b0002006e6c6374726c000006000100100000000800030002000000080004000000000008000500000000002c000600140001000800010003000000080002000e00000014000200080001000a000000080002000c0000001c0007001800010008000200100000000b0001006e6f746966790000"
	capAckNlctrl       = "24000000020000013c074385116100000000000020000000100005003c07438500000000"
	// GETFAMILY "nbd" without the module: ENOENT (-2), capped.
	capNoFamilyNbd = "24000000020000013d07438511610000feffffff1c000000100005003d07438500000000"
	// GETFAMILY without a name: EINVAL (-22), capped.
	capEinval = "24000000020000013e07438511610000eaffffff14000000100005003e07438500000000"
)

func TestEncodeRequestMatchesCapture(t *testing.T) {
	var e Encoder
	e.String(ctrlAttrFamilyName, "nlctrl")
	attrs, _ := e.Bytes()
	b, err := encodeRequest(0x10, FlagRequest|FlagAck, 0x8543073c, ctrlCmdGetFamily, ctrlVersion, attrs)
	if err != nil {
		t.Fatal(err)
	}
	if h := hex.EncodeToString(b); h != capGetFamilyNlctrl {
		t.Errorf("request\n got %s\nwant %s", h, capGetFamilyNlctrl)
	}
}

func TestParseCapturedReplies(t *testing.T) {
	msgs, err := ParseMessages(mustHex(t, capFamilyNlctrl))
	if err != nil || len(msgs) != 1 {
		t.Fatalf("reply: %v %v", msgs, err)
	}
	if h := msgs[0].Header; h.Type != 0x10 || h.Seq != 0x8543073c || h.PortID != 0x6111 {
		t.Errorf("header %+v", h)
	}
	f, err := ParseFamily(msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != 0x10 || f.Name != "nlctrl" || f.Version != 2 || len(f.Groups) != 1 || f.Groups[0].Name != "notify" || f.Groups[0].ID != 0x10 {
		t.Errorf("family %+v", f)
	}
	if !f.HasOp(ctrlCmdGetFamily) || f.HasOp(99) {
		t.Errorf("ops %+v", f.Ops)
	}

	acks, err := ParseMessages(mustHex(t, capAckNlctrl))
	if err != nil || len(acks) != 1 {
		t.Fatalf("ack: %v %v", acks, err)
	}
	if err := ParseAck(acks[0]); err != nil {
		t.Errorf("ack: %v", err)
	}

	for _, tc := range []struct {
		hex   string
		errno syscall.Errno
	}{{capNoFamilyNbd, syscall.ENOENT}, {capEinval, syscall.EINVAL}} {
		m, err := ParseMessages(mustHex(t, tc.hex))
		if err != nil || len(m) != 1 {
			t.Fatalf("%v %v", m, err)
		}
		err = ParseAck(m[0])
		var ne *Error
		if !errors.As(err, &ne) || ne.Errno != tc.errno || !errors.Is(err, tc.errno) {
			t.Errorf("error %v, want errno %v", err, tc.errno)
		}
	}
}

func TestParseMessagesSeveralInOneDatagram(t *testing.T) {
	d := append(mustHex(t, capFamilyNlctrl), mustHex(t, capAckNlctrl)...)
	msgs, err := ParseMessages(d)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("%d messages, %v", len(msgs), err)
	}
	if msgs[0].Header.Type != 0x10 || msgs[1].Header.Type != typeError {
		t.Errorf("types %d %d", msgs[0].Header.Type, msgs[1].Header.Type)
	}
	// Payloads are copies: scribbling over the datagram changes nothing.
	clear(d)
	if f, err := ParseFamily(msgs[0]); err != nil || f.Name != "nlctrl" {
		t.Errorf("after clearing the buffer: %+v %v", f, err)
	}
}

// An error with the request echoed (no NETLINK_CAP_ACK) and extended-ACK
// attributes after it: message, offset, missing attribute type.
func TestParseAckExtended(t *testing.T) {
	req, _ := encodeRequest(0x20, FlagRequest|FlagAck, 7, 1, 1, mustHex(t, "0800010001000000"))
	var tl Encoder
	tl.String(errAttrMsg, "must specify a size in bytes")
	tl.Uint32(errAttrOffset, 20)
	tl.Uint32(errAttrMissType, 2)
	tlvs, _ := tl.Bytes()
	payload := append(mustHex(t, "eaffffff"), req...)
	payload = append(payload, tlvs...)
	m := Message{Header: Header{Type: typeError, Flags: flagAckTLVs, Seq: 7}, Payload: payload}
	err := ParseAck(m)
	var ne *Error
	if !errors.As(err, &ne) {
		t.Fatalf("%v", err)
	}
	if ne.Errno != syscall.EINVAL || ne.Message != "must specify a size in bytes" || !ne.HasOffset || ne.Offset != 20 || ne.MissingType != 2 {
		t.Errorf("%+v", ne)
	}
	if s := ne.Error(); s != "netlink: invalid argument: must specify a size in bytes (attribute at offset 20) (missing attribute 2)" {
		t.Errorf("message %q", s)
	}

	// The same, capped: only the request's header is echoed.
	capped := append(mustHex(t, "eaffffff"), req[:headerLen]...)
	capped = append(capped, tlvs...)
	m = Message{Header: Header{Type: typeError, Flags: flagAckTLVs | flagCapped}, Payload: capped}
	if err := ParseAck(m); !errors.As(err, &ne) || ne.Message != "must specify a size in bytes" {
		t.Errorf("capped: %v", err)
	}
}

func TestParseMalformedMessages(t *testing.T) {
	for _, tc := range []struct{ name, hex string }{
		{"short header", "1000000002000000"},
		{"length past the end", "ff000000100000000000000000000000"},
		{"length under the header", "08000000100000000000000000000000"},
	} {
		if _, err := ParseMessages(mustHex(t, tc.hex)); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	// An acknowledgement too short for its fields.
	if err := ParseAck(Message{Header: Header{Type: typeError}, Payload: mustHex(t, "00000000")}); err == nil {
		t.Error("short ack accepted")
	}
	// A positive errno is nonsense.
	if err := ParseAck(Message{Header: Header{Type: typeError, Flags: flagCapped}, Payload: make([]byte, 20)}); err != nil {
		t.Errorf("zero ack: %v", err)
	}
	p := make([]byte, 20)
	p[0] = 5
	var ne *Error
	if err := ParseAck(Message{Header: Header{Type: typeError, Flags: flagCapped}, Payload: p}); err == nil || errors.As(err, &ne) {
		t.Errorf("positive errno: %v", err)
	}
	// Echoed request longer than what follows.
	p = make([]byte, 20)
	copy(p[4:], mustHex(t, "ff000000"))
	p[0], p[1], p[2], p[3] = 0xea, 0xff, 0xff, 0xff
	if err := ParseAck(Message{Header: Header{Type: typeError}, Payload: p}); errors.As(err, &ne) {
		t.Errorf("bad echo length accepted: %v", err)
	}
}
