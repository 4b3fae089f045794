package kernel

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/kernel/internal/genl"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// messages parses captured datagrams.
func messages(t testing.TB, datagrams ...string) []genl.Message {
	t.Helper()
	var all []genl.Message
	for _, d := range datagrams {
		m, err := genl.ParseMessages(unhex(t, d))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, m...)
	}
	return all
}

// attrsOf returns the attributes of a captured request.
func attrsOf(t testing.TB, datagram string) string {
	t.Helper()
	return datagram[(16+4)*2:]
}

func TestEncodeConnectAsTheKernelAccepted(t *testing.T) {
	b, err := encodeConnect(ConnectRequest{
		Index:             AnyIndex,
		Size:              32 << 20,
		BlockSize:         4096,
		DeadConnTimeout:   10 * time.Second,
		ServerFlags:       0x16d,
		Sockets:           []int{7, 9},
		BackendIdentifier: "mem-0001",
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(b), attrsOf(t, cap61Connect); got != want {
		t.Errorf("connect attributes\n got %s\nwant %s", got, want)
	}
}

func TestEncodeConnectWithoutCookieSupport(t *testing.T) {
	r := ConnectRequest{Index: 3, Size: 1 << 20, Sockets: []int{5}, BackendIdentifier: "x", Timeout: 1500 * time.Millisecond,
		ClientFlags: DestroyOnDisconnect, ServerFlags: FlagHasFlags}
	b, err := encodeConnect(r, false)
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := genl.ParseAttrs(b)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint16]genl.Attr{}
	for _, a := range attrs {
		got[a.Type] = a
	}
	if _, ok := got[attrBackendIdentifier]; ok {
		t.Error("cookie sent to a kernel that predates it")
	}
	if v, _ := got[attrIndex].Uint32(); v != 3 {
		t.Errorf("index %d", v)
	}
	if v, _ := got[attrTimeout].Uint64(); v != 2 {
		t.Errorf("timeout %d s, want 1.5 s rounded up to 2", v)
	}
	if v, _ := got[attrClientFlags].Uint64(); v != uint64(DestroyOnDisconnect) {
		t.Errorf("client flags %d", v)
	}
	if _, ok := got[attrBlockSizeBytes]; ok {
		t.Error("block size sent though unset")
	}
	if _, ok := got[attrDeadConnTimeout]; ok {
		t.Error("dead connection timeout sent though unset")
	}
	b, _ = encodeConnect(r, true)
	if !strings.Contains(hex.EncodeToString(b), "06000a0078000000") {
		t.Errorf("cookie missing with support: %x", b)
	}
}

func TestEncodeConnectRefusals(t *testing.T) {
	for name, r := range map[string]ConnectRequest{
		"no size":     {Index: AnyIndex, Sockets: []int{3}},
		"no sockets":  {Index: AnyIndex, Size: 4096},
		"bad index":   {Index: -2, Size: 4096, Sockets: []int{3}},
		"bad fd":      {Index: AnyIndex, Size: 4096, Sockets: []int{-1}},
		"long cookie": {Index: AnyIndex, Size: 4096, Sockets: []int{3}, BackendIdentifier: strings.Repeat("x", 70000)},
	} {
		if _, err := encodeConnect(r, true); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

// A size-only RECONFIGURE repeats the cookie and nothing else.
func TestEncodeReconfigureResize(t *testing.T) {
	b, err := encodeReconfigure(ReconfigureRequest{Index: 4, Size: 128 << 20, BackendIdentifier: "pvc-1"}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "0800010004000000" + "0c0002000000000800000000" + "0a000a007076632d31000000"
	if got := hex.EncodeToString(b); got != want {
		t.Errorf("resize\n got %s\nwant %s", got, want)
	}
	if _, err := encodeReconfigure(ReconfigureRequest{Index: AnyIndex}, true); err == nil {
		t.Error("reconfigure without an index encoded")
	}
	cf := ClientFlags(0)
	b, _ = encodeReconfigure(ReconfigureRequest{Index: 1, ClientFlags: &cf, Sockets: []int{8}, DeadConnTimeout: time.Minute}, false)
	attrs, _ := genl.ParseAttrs(b)
	var types []uint16
	for _, a := range attrs {
		types = append(types, a.Type)
	}
	if len(types) != 4 || types[0] != attrIndex || types[1] != attrDeadConnTimeout || types[2] != attrClientFlags || types[3] != attrSockets {
		t.Errorf("attribute types %v", types)
	}
}

// A reattach without a request timeout says so: NBD_ATTR_TIMEOUT 0
// clears one the device may have had; Timeout 0 alone sends nothing.
func TestEncodeReconfigureNoTimeout(t *testing.T) {
	for _, c := range []struct {
		r    ReconfigureRequest
		want bool
	}{
		{ReconfigureRequest{Index: 1}, false},
		{ReconfigureRequest{Index: 1, NoTimeout: true}, true},
		{ReconfigureRequest{Index: 1, Timeout: 5 * time.Second}, true},
	} {
		b, err := encodeReconfigure(c.r, true)
		if err != nil {
			t.Fatal(err)
		}
		attrs, _ := genl.ParseAttrs(b)
		found := false
		for _, a := range attrs {
			if a.Type == attrTimeout {
				found = true
				if v := binary.LittleEndian.Uint64(a.Data); c.r.NoTimeout && v != 0 {
					t.Errorf("%+v: timeout %d, want 0", c.r, v)
				}
			}
		}
		if found != c.want {
			t.Errorf("%+v: timeout attribute sent %v, want %v", c.r, found, c.want)
		}
	}
}

func TestSetIOTimeout(t *testing.T) {
	root := t.TempDir()
	q := filepath.Join(root, "block", "nbd3", "queue")
	if err := os.MkdirAll(q, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(q, "io_timeout"), []byte("30000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := sysfsAt(root)
	for d, want := range map[time.Duration]string{time.Second: "1000", 1500 * time.Millisecond: "1500", time.Microsecond: "1"} {
		if err := s.setIOTimeout(3, d); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(q, "io_timeout")); string(b) != want {
			t.Errorf("%v: io_timeout %q, want %q", d, b, want)
		}
	}
	if err := s.setIOTimeout(4, time.Second); err == nil {
		t.Error("io_timeout of a device that does not exist written")
	}
}

func TestCapturedFamilyTellsCookieSupport(t *testing.T) {
	msgs := messages(t, cap61Family)
	f, err := genl.ParseFamily(msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "nbd" || f.ID != 0x20 || f.Version != 1 || f.MaxAttr != attrBackendIdentifier {
		t.Errorf("family %+v", f)
	}
	for _, op := range []uint32{cmdConnect, cmdDisconnect, cmdReconfigure, cmdStatus} {
		if !f.HasOp(op) {
			t.Errorf("op %d missing", op)
		}
	}
	c := &Client{family: f}
	if !c.BackendIdentifierSupported() {
		t.Error("6.1 kernel reported without cookies")
	}
	f.MaxAttr = attrDeviceList // what 4.12–5.13 report
	if (&Client{family: f}).BackendIdentifierSupported() {
		t.Error("pre-5.14 kernel reported with cookies")
	}
	if err := genl.ParseAck(messages(t, cap61FamilyAck)[0]); err != nil {
		t.Error(err)
	}
}

func TestCapturedStatus(t *testing.T) {
	if got := attrsOf(t, cap61StatusReq); got != "" {
		t.Errorf("status request for all devices carries attributes %s", got)
	}
	b, _ := encodeIndex(AnyIndex)
	if len(b) != 0 {
		t.Errorf("status for all: %x", b)
	}
	l, err := parseStatusReply(messages(t, cap61Status))
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 4 {
		t.Fatalf("%d devices, want 4", len(l))
	}
	for i, d := range l {
		if d.Index != i || d.Connected {
			t.Errorf("device %d: %+v", i, d)
		}
	}
	if _, err := parseStatusReply(messages(t, cap61ConnectRep)); err == nil {
		t.Error("a CONNECT reply parsed as STATUS")
	}
}

func TestCapturedConnectReply(t *testing.T) {
	msgs := messages(t, cap61ConnectRep, cap61ConnectAck)
	i, err := parseConnectReply(msgs[:1])
	if err != nil || i != 0 {
		t.Errorf("index %d, %v", i, err)
	}
	if err := genl.ParseAck(msgs[1]); err != nil {
		t.Error(err)
	}
	if _, err := parseConnectReply(messages(t, cap61Status)); err == nil {
		t.Error("a STATUS reply parsed as CONNECT")
	}
}

func TestStatusMalformed(t *testing.T) {
	var e genl.Encoder
	e.Nested(attrDeviceList, func(e *genl.Encoder) {
		e.Nested(deviceItem, func(e *genl.Encoder) { e.Uint8(deviceConnected, 1) })
	})
	attrs, _ := e.Bytes()
	m := genl.Message{Header: genl.Header{Type: 0x20}, Payload: append([]byte{cmdStatus, 1, 0, 0}, attrs...)}
	if _, err := parseStatusReply([]genl.Message{m}); err == nil {
		t.Error("device item without an index accepted")
	}
	var w genl.Encoder
	w.Nested(attrDeviceList, func(e *genl.Encoder) {
		e.Nested(deviceItem, func(e *genl.Encoder) { e.Uint64(deviceIndex, 1) })
	})
	attrs, _ = w.Bytes()
	m.Payload = append([]byte{cmdStatus, 1, 0, 0}, attrs...)
	if _, err := parseStatusReply([]genl.Message{m}); err == nil {
		t.Error("u64 device index accepted")
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]uint64{0: 0, -time.Second: 0, time.Nanosecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, time.Minute: 60} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%v) = %d, want %d", d, got, want)
		}
	}
}

// incoherent is a backend without optional abilities.
type incoherent struct{ size int64 }

func (b incoherent) ReadAt(_ context.Context, p []byte, _ int64) (int, error)  { return len(p), nil }
func (b incoherent) WriteAt(_ context.Context, p []byte, _ int64) (int, error) { return len(p), nil }
func (b incoherent) Size() int64                                               { return b.size }

func TestServerFlags(t *testing.T) {
	mem, _ := nbd.NewMemory(1 << 20)
	if f := serverFlags(mem, false, false); f != FlagHasFlags|FlagSendFlush|FlagSendFUA|FlagSendTrim|FlagSendWriteZeroes|FlagCanMultiConn {
		t.Errorf("memory: %#x", uint64(f))
	}
	if f := serverFlags(mem, true, true); f != FlagHasFlags|FlagReadOnly|FlagSendFlush|FlagRotational|FlagCanMultiConn {
		t.Errorf("memory read-only rotational: %#x", uint64(f))
	}
	if f := serverFlags(incoherent{1 << 20}, false, false); f != FlagHasFlags|FlagSendWriteZeroes {
		t.Errorf("plain backend: %#x", uint64(f))
	}
	// The flags the 6.1 kernel was given for a Memory export in the VM.
	if f := serverFlags(mem, false, false); f != 0x16d {
		t.Errorf("memory: %#x, the VM test sent 0x16d", uint64(f))
	}
}

// TestServerFlagsAsServed: the kernel is given the flags the server
// announces to a userspace client for the same export, restricted to
// those the kernel reads.
func TestServerFlagsAsServed(t *testing.T) {
	mem, _ := nbd.NewMemory(1 << 20)
	for _, b := range []nbd.Backend{mem, incoherent{1 << 20}} {
		for _, ro := range []bool{false, true} {
			e := nbd.Export{Backend: b, ReadOnly: ro, Rotational: ro}
			f, err := e.TransmissionFlags()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := serverFlags(b, ro, ro), ServerFlags(f)&kernelFlags; got != want {
				t.Errorf("%T read-only %v: kernel flags %#x, the server announces %#x", b, ro, uint64(got), uint64(want))
			}
		}
	}
}

func TestAttachConfigCheck(t *testing.T) {
	mem, _ := nbd.NewMemory(10 << 20)
	for name, c := range map[string]AttachConfig{
		"no backend":         {},
		"odd block size":     {Backend: mem, BlockSize: 1000},
		"small block size":   {Backend: mem, BlockSize: 256},
		"size not multiple":  {Backend: mem, Size: 4097, BlockSize: 4096},
		"too many conns":     {Backend: mem, Conns: 5000},
		"negative conns":     {Backend: mem, Conns: -1},
		"empty backend size": {Backend: incoherent{0}},
		"resend with conns":  {Backend: mem, ResendInterval: time.Second, Conns: 4, DeadConnTimeout: time.Minute},
		"resend with timeout": {Backend: mem, ResendInterval: time.Second, Timeout: 30 * time.Second,
			DeadConnTimeout: time.Minute},
		"resend with min timeout": {Backend: mem, ResendInterval: time.Second, MinTimeout: time.Second,
			DeadConnTimeout: time.Minute},
		"resend without dead timeout": {Backend: mem, ResendInterval: time.Second},
		"negative resend":             {Backend: mem, ResendInterval: -time.Second},
	} {
		if err := c.check(false); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := AttachConfig{Backend: mem}
	if err := c.check(false); err != nil {
		t.Fatal(err)
	}
	if c.BlockSize != DefaultBlockSize || c.Size != 10<<20 || c.Conns != 1 || c.Logger == nil {
		t.Errorf("defaults %+v", c)
	}
	c = AttachConfig{Backend: mem, ResendInterval: time.Second, DeadConnTimeout: time.Minute}
	if err := c.check(false); err != nil || c.Conns != 1 {
		t.Errorf("a resend interval on the default single connection: %v, %d conns", err, c.Conns)
	}
	var oe *OpError
	err := error(&OpError{Op: "connect", Index: 2, Err: errors.New("boom")})
	if !errors.As(err, &oe) || err.Error() != "nbd connect /dev/nbd2: boom" {
		t.Errorf("%v", err)
	}
}

func TestLinkDeadNotification(t *testing.T) {
	l, err := parseLinkDead(messages(t, cap61LinkDead1))
	if err != nil || len(l) != 1 || l[0] != 1 {
		t.Errorf("LINK_DEAD for nbd1 decoded as %v, %v", l, err)
	}
	// Other commands are not notifications of dead links.
	if l, err := parseLinkDead(messages(t, cap61ConnectRep, cap61Status)); err != nil || len(l) != 0 {
		t.Errorf("CONNECT and STATUS replies decoded as LINK_DEAD: %v, %v", l, err)
	}
	// An index of the wrong size is an error, not a device.
	var e genl.Encoder
	e.Uint16(attrIndex, 3)
	attrs, _ := e.Bytes()
	m := genl.Message{Header: genl.Header{Type: 0x20}, Payload: append([]byte{cmdLinkDead, 1, 0, 0}, attrs...)}
	if l, err := parseLinkDead([]genl.Message{m}); err == nil {
		t.Errorf("a 2-byte index accepted: %v", l)
	}
}
