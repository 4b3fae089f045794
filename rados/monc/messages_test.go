package monc

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/purerbd/purerbd/rados/denc"
)

func TestEncodeSubscribe(t *testing.T) {
	got := encodeSubscribe(map[string]subItem{"osdmap": {start: 7}, "monmap": {start: 2, flags: subscribeOnetime}}, "h")
	want := "02000000" + // two entries, in key order
		"06000000" + hex.EncodeToString([]byte("monmap")) + "0200000000000000" + "01" +
		"06000000" + hex.EncodeToString([]byte("osdmap")) + "0700000000000000" + "00" +
		"01000000" + hex.EncodeToString([]byte("h"))
	if hex.EncodeToString(got) != want {
		t.Errorf("MMonSubscribe\n got %x\nwant %s", got, want)
	}
}

func TestEncodeCommand(t *testing.T) {
	fsid := denc.UUID{1, 2, 3}
	got := encodeCommand(fsid, []string{"{}"})
	want := "0000000000000000" + "ffff" + "0000000000000000" + // paxos header
		hex.EncodeToString(fsid[:]) + "01000000" + "02000000" + "7b7d"
	if hex.EncodeToString(got) != want {
		t.Errorf("MMonCommand\n got %x\nwant %s", got, want)
	}
	if a, err := decodeCommandAck(append(got[:denc.PaxosHeaderLen:denc.PaxosHeaderLen], 0xfe, 0xff, 0xff, 0xff, 1, 0, 0, 0, 'x', 0, 0, 0, 0)); err != nil ||
		a.r != -2 || a.rs != "x" || len(a.cmd) != 0 {
		t.Errorf("ack: %+v, %v", a, err)
	}
}

func TestEncodeAuthAndRequests(t *testing.T) {
	got := encodeAuth(2, []byte{9, 9}, 3)
	want := "0000000000000000ffff0000000000000000" + "02000000" + "020000000909" + "03000000"
	if hex.EncodeToString(got) != want {
		t.Errorf("MAuth\n got %x\nwant %s", got, want)
	}
	if got := hex.EncodeToString(encodeGetVersion(5, "osdmap")); got != "0500000000000000"+"06000000"+hex.EncodeToString([]byte("osdmap")) {
		t.Errorf("MMonGetVersion %s", got)
	}
	if got := hex.EncodeToString(encodeGetOSDMap(4, 5, 0, 0)); got != "0000000000000000ffff0000000000000000"+"04000000050000000000000000000000" {
		t.Errorf("MMonGetOSDMap %s", got)
	}
}

func TestDecodeCaptures(t *testing.T) {
	if m, err := decodeMonMapMessage(readCapture(t, "MMonMap.bin")); err != nil || len(m.Mons) != 1 || m.Epoch == 0 {
		t.Errorf("MMonMap: %v, %v", m, err)
	}
	full, err := decodeOSDMapEpochs(readCapture(t, "MOSDMap-full.v4.bin"), 4)
	if err != nil || len(full.full) != 1 || full.incLast != 0 || full.oldest != 1 || full.newest != full.fullLast {
		t.Errorf("full MOSDMap: %+v, %v", full, err)
	}
	inc, err := decodeOSDMapEpochs(readCapture(t, "MOSDMap-inc.v4.bin"), 4)
	if err != nil || inc.incFirst != full.fullLast+1 || inc.incLast != inc.incFirst || len(inc.full) != 0 || inc.fsid != full.fsid {
		t.Errorf("incremental MOSDMap: %+v, %v", inc, err)
	}
	empty, err := decodeOSDMapEpochs(readCapture(t, "MOSDMap-empty.v4.bin"), 4)
	if err != nil || empty.last() != 0 || empty.newest == 0 {
		t.Errorf("empty MOSDMap: %+v, %v", empty, err)
	}
	// a version 1 sender has no oldest/newest: the same bytes then have
	// a trailer the envelope ignores
	if v1, err := decodeOSDMapEpochs(readCapture(t, "MOSDMap-inc.v4.bin"), 1); err != nil || v1.newest != 0 || v1.incLast != inc.incLast {
		t.Errorf("MOSDMap read as version 1: %+v, %v", v1, err)
	}
	a, err := decodeCommandAck(readCapture(t, "MMonCommandAck-enoent.bin"))
	if err != nil || a.r != -2 || a.rs != "unrecognized pool 'nope'" || len(a.cmd) != 1 {
		t.Errorf("MMonCommandAck: %+v, %v", a, err)
	}
	if a, err := decodeCommandAck(readCapture(t, "MMonCommandAck-pool-ls.bin")); err != nil || a.r != 0 {
		t.Errorf("MMonCommandAck: %+v, %v", a, err)
	}
	v, err := decodeVersionReply(readCapture(t, "MMonGetVersionReply.v2.bin"), 2)
	if err != nil || v.handle != 6 || v.newest == 0 || v.oldest != 1 {
		t.Errorf("MMonGetVersionReply: %+v, %v", v, err)
	}
	if v, err := decodeVersionReply(readCapture(t, "MMonGetVersionReply.v2.bin")[:16], 1); err != nil || v.oldest != 0 {
		t.Errorf("MMonGetVersionReply v1: %+v, %v", v, err)
	}
	r, err := decodeAuthReply(readCapture(t, "MAuthReply-renewal.bin"))
	if err != nil || r.result != 0 || r.protocol != 2 || r.globalID == 0 || len(r.payload) == 0 {
		t.Errorf("MAuthReply: %+v, %v", r, err)
	}
	r, err = decodeAuthReply(readCapture(t, "MAuthReply-refused.bin"))
	if err != nil || r.result >= 0 {
		t.Errorf("refused MAuthReply: %+v, %v", r, err)
	}
	t.Logf("refused renewal: result %d msg %q", r.result, r.msg)
	if c, err := decodeConfigMessage(readCapture(t, "MConfig.bin")); err != nil || c["rbd_cache"] != "false" {
		t.Errorf("MConfig: %v, %v", c, err)
	}
	if a, err := decodeSubscribeAck([]byte{10, 0, 0, 0}); err != nil || a.interval != 10 {
		t.Errorf("MMonSubscribeAck without fsid: %+v, %v", a, err)
	}
	if a, err := decodeSubscribeAck(append([]byte{10, 0, 0, 0}, bytes.Repeat([]byte{7}, 16)...)); err != nil || a.fsid[15] != 7 {
		t.Errorf("MMonSubscribeAck: %+v, %v", a, err)
	}
}

// TestDecodeRejects feeds each decoder truncated captures, oversized
// lengths and absurd counts: each must fail with a denc error.
func TestDecodeRejects(t *testing.T) {
	decoders := []struct {
		name, capture string
		upto          int // prefixes shorter than len*upto/100 must fail
		dec           func([]byte) error
	}{
		{"MMonMap", "MMonMap.bin", 100, func(b []byte) error { _, err := decodeMonMapMessage(b); return err }},
		{"MOSDMap", "MOSDMap-full.v4.bin", 90, func(b []byte) error { _, err := decodeOSDMapEpochs(b, 4); return err }},
		{"MMonCommandAck", "MMonCommandAck-enoent.bin", 100, func(b []byte) error { _, err := decodeCommandAck(b); return err }},
		{"MAuthReply", "MAuthReply-renewal.bin", 100, func(b []byte) error { _, err := decodeAuthReply(b); return err }},
		{"MMonGetVersionReply", "MMonGetVersionReply.v2.bin", 100, func(b []byte) error { _, err := decodeVersionReply(b, 2); return err }},
		{"MConfig", "MConfig.bin", 100, func(b []byte) error { _, err := decodeConfigMessage(b); return err }},
		{"MMonSubscribeAck", "", 0, func(b []byte) error { _, err := decodeSubscribeAck(b); return err }},
	}
	check := func(name string, err error, input string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s accepted %s", name, input)
		} else if !errors.Is(err, denc.ErrShort) && !errors.Is(err, denc.ErrInvalid) {
			t.Errorf("%s on %s: untyped error %v", name, input, err)
		}
	}
	huge := []byte{0xff, 0xff, 0xff, 0x7f}
	for _, d := range decoders {
		check(d.name, d.dec(nil), "empty input")
		if d.capture == "" {
			continue
		}
		b := readCapture(t, d.capture)
		for n := 0; n < len(b)*d.upto/100; n++ {
			if err := d.dec(b[:n]); err == nil {
				t.Errorf("%s accepted %d of %d bytes", d.name, n, len(b))
				break
			}
		}
		// every u32 that may be a length or count, made absurd
		for off := 0; off+4 <= len(b); off++ {
			c := append([]byte(nil), b...)
			copy(c[off:], huge)
			_ = d.dec(c) // must not panic or allocate what the input cannot hold
		}
	}
	_, err := decodeCommandAck(append(make([]byte, denc.PaxosHeaderLen+4), huge...))
	check("MMonCommandAck", err, "a huge status length")
	_, err = decodeConfigMessage(huge)
	check("MConfig", err, "a huge count")
	// epochs out of order
	e := denc.NewEncoder(make([]byte, 16))
	e.U32(2)
	e.U32(5)
	e.Blob(nil)
	e.U32(4)
	e.Blob(nil)
	e.U32(0)
	if _, err = decodeOSDMapEpochs(e.Bytes(), 1); !errors.Is(err, denc.ErrInvalid) {
		t.Errorf("unordered epochs: %v", err)
	}
}
