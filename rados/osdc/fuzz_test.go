package osdc

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

// The fuzz targets take a message's header version, front and data
// segments. Seeds in testdata/fuzz are messages real OSDs and monitors
// sent (TestWireWithRealOSD with PURERBD_WRITE_SEEDS=1 rewrites them);
// the f.Add seeds are encodings of this package's own.

func FuzzOSDOpReply(f *testing.F) {
	r := &MOSDOpReply{Tid: 7, OID: "obj", PGID: denc.PG{Pool: 2, Seed: 0x1f}, Result: -2, Epoch: 12,
		Ops:      []OSDOp{{Code: OpRead, RVal: 0, OutData: []byte("data")}, {Code: OpStat, RVal: -2}},
		Redirect: &Redirect{Oloc: denc.NewObjectLocator(3), OID: "other"}}
	m := r.Message()
	f.Add(m.Version, m.Front, m.Data)
	f.Fuzz(func(t *testing.T, version uint16, front, data []byte) {
		msg := &msgr.Message{Type: MsgOSDOpReply, Version: version, Front: front, Data: data}
		var r *MOSDOpReply
		var err error
		alloctest.Check(t, 2+len(front)+len(data), func() { r, err = DecodeOSDOpReply(msg) })
		if err != nil {
			return
		}
		// what decodes re-encodes (as v8) and decodes to the same reply
		m := r.Message()
		r2, err := DecodeOSDOpReply(m)
		if err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if version < 5 {
			return // the versions and rvals of old encodings are synthesised
		}
		normalizeReply(r)
		normalizeReply(r2)
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip differs:\n%+v\n%+v", r, r2)
		}
	})
}

func normalizeReply(r *MOSDOpReply) {
	for i := range r.Ops {
		r.Ops[i].payloadLen = 0
		if len(r.Ops[i].OutData) == 0 {
			r.Ops[i].OutData = nil
		}
	}
	if len(r.Ops) == 0 {
		r.Ops = nil
	}
	if r.Redirect != nil && r.Redirect.Oloc.Hash != -1 && r.Redirect.Oloc.Key != "" {
		r.Redirect = nil
	}
}

func FuzzWatchNotify(f *testing.F) {
	m := (&MWatchNotify{Opcode: WatchEventNotifyComplete, Cookie: 3, NotifyID: 99, Data: []byte{0, 0, 0, 0, 0, 0, 0, 0}, ReturnCode: -110}).Message()
	f.Add(m.Version, m.Front, m.Data)
	f.Fuzz(func(t *testing.T, version uint16, front, data []byte) {
		var w *MWatchNotify
		var err error
		alloctest.Check(t, 2+len(front)+len(data), func() {
			w, err = DecodeWatchNotify(&msgr.Message{Type: MsgWatchNotify, Version: version, Front: front, Data: data})
			if err == nil {
				_, _, _ = DecodeNotifyAcks(w.Data)
			}
		})
		if err != nil {
			return
		}
		if version < 3 || len(front) == 0 || front[0] == 0 {
			return
		}
		w2, err := DecodeWatchNotify(w.Message())
		if err != nil || w2.Cookie != w.Cookie || w2.NotifyID != w.NotifyID || !bytes.Equal(w2.Payload, w.Payload) || !bytes.Equal(w2.Data, w.Data) ||
			w2.ReturnCode != w.ReturnCode || w2.NotifierGID != w.NotifierGID || w2.Opcode != w.Opcode {
			t.Fatalf("round trip: %+v -> %+v, %v", w, w2, err)
		}
	})
}

func FuzzOSDBackoff(f *testing.F) {
	b := &MOSDBackoff{PGID: denc.SPG{PG: denc.PG{Pool: 1, Seed: 3}, Shard: denc.NoShard}, Epoch: 20, Op: BackoffBlock, ID: 5,
		Begin: HObject{OID: "a", Hash: 0x10, Pool: 1, Snap: SnapHead}, End: HObject{OID: "z", Hash: 0x20, Pool: 1, Snap: SnapHead}}
	m := b.Message()
	f.Add(m.Version, m.Front, m.Data)
	b.Op, b.Begin, b.End = BackoffUnblock, MinHObject(), MaxHObject()
	m = b.Message()
	f.Add(m.Version, m.Front, m.Data)
	f.Fuzz(func(t *testing.T, version uint16, front, data []byte) {
		var b *MOSDBackoff
		var err error
		alloctest.Check(t, 2+len(front)+len(data), func() {
			b, err = DecodeOSDBackoff(&msgr.Message{Type: MsgOSDBackoff, Version: version, Front: front, Data: data})
		})
		if err != nil {
			return
		}
		b2, err := DecodeOSDBackoff(b.Message())
		if err != nil || !reflect.DeepEqual(b, b2) {
			t.Fatalf("round trip: %+v -> %+v, %v", b, b2, err)
		}
		_ = b.covers(b.Begin)
	})
}

func FuzzOSDMapMessage(f *testing.F) {
	m := (&MOSDMap{Incrementals: map[uint32][]byte{3: {1, 2}}, Maps: map[uint32][]byte{2: {9}}, Oldest: 1, Newest: 3}).Message()
	f.Add(m.Version, m.Front, m.Data)
	f.Fuzz(func(t *testing.T, version uint16, front, data []byte) {
		var mm *MOSDMap
		var err error
		alloctest.Check(t, 2+len(front)+len(data), func() {
			mm, err = DecodeOSDMapMessage(&msgr.Message{Type: MsgOSDMap, Version: version, Front: front, Data: data})
		})
		if err != nil {
			return
		}
		mm2, err := DecodeOSDMapMessage(mm.Message())
		if err != nil || len(mm2.Maps) != len(mm.Maps) || len(mm2.Incrementals) != len(mm.Incrementals) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzOpResults feeds the parsers of operation outputs: the first byte
// picks the parser.
func FuzzOpResults(f *testing.F) {
	e := denc.NewEncoder(nil)
	e.U32(1)
	e.String("k")
	e.Blob([]byte("v"))
	e.Bool(true)
	f.Add(append([]byte{1}, e.Bytes()...))
	f.Add([]byte{0, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		alloctest.Check(t, len(b), func() { parseOpResult(t, b[0], b[1:]) })
	})
}

// parseOpResult runs the parser of operation outputs that sel picks.
func parseOpResult(t *testing.T, sel byte, p []byte) {
	switch sel % 9 {
	case 0:
		_, _, _ = ParseStat(p)
	case 1:
		_, _, _ = ParseOmapVals(p)
	case 2:
		_, _, _ = ParseOmapKeys(p)
	case 3:
		_, _ = ParseXattrs(p)
	case 4:
		_, _, _ = ParseSparseRead(p)
	case 5:
		next, _, err := ParseNLSResponse(p)
		if err == nil {
			_ = next.String()
		}
	case 6:
		_, _, _ = DecodeNotifyAcks(p)
	case 7:
		_, _ = ParseWatchers(p)
	case 8:
		var h HObject
		d := denc.NewDecoder(p)
		h.Decode(d)
		if d.Err() == nil {
			e := denc.NewEncoder(nil)
			h.Encode(e)
			var h2 HObject
			d2 := denc.NewDecoder(e.Bytes())
			h2.Decode(d2)
			if d2.Err() != nil || h2.Compare(h) != 0 {
				t.Fatalf("hobject round trip: %v %v", h, h2)
			}
		}
	}
}

func FuzzOSDOp(f *testing.F) {
	m := (&MOSDOp{Tid: 1, PGID: denc.SPG{PG: denc.PG{Pool: 1, Seed: 2}, Shard: denc.NoShard}, Oloc: denc.NewObjectLocator(1),
		OID: "o", Ops: []OSDOp{Write(0, []byte("abc")), SetXattr("n", []byte("v"))}, SnapID: SnapHead}).Message()
	f.Add(m.Version, m.Front, m.Data)
	f.Fuzz(func(t *testing.T, version uint16, front, data []byte) {
		var op *MOSDOp
		var err error
		alloctest.Check(t, 2+len(front)+len(data), func() {
			op, err = DecodeOSDOp(&msgr.Message{Type: MsgOSDOp, Version: version, Front: front, Data: data})
		})
		if err != nil {
			return
		}
		op2, err := DecodeOSDOp(op.Message())
		if err != nil || op2.OID != op.OID || len(op2.Ops) != len(op.Ops) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
