package osdc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

// TestWireWithRealOSD talks to an OSD over a bare msgr connection with
// messages this package encodes, and decodes what the OSD answers: every
// operation builder against the real thing, without the objecter in
// between. With PURERBD_WRITE_SEEDS=1 it stores the OSD's messages as
// the seed corpora of the fuzz targets.
func TestWireWithRealOSD(t *testing.T) {
	tc := connect(t, cluster, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const oid = "wire-obj"
	m := tc.ob.Map()
	b := base{oloc: denc.ObjectLocator{Pool: tc.pool, Hash: -1}, oid: oid, flags: FlagWrite}
	tg, err := calcTarget(m, &b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := m.Addrs(tg.osd).Msgr2()
	conn, err := msgr.DialAddr(ctx, addr, msgr.Config{Auth: tc.mc.Auth(), PeerType: osdEntity})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	var seeds, sent []*msgr.Message
	var results [][]byte // op outputs, prefixed with FuzzOpResults' parser byte
	tid := uint64(0)
	roundTrip := func(flags uint32, ops ...OSDOp) *MOSDOpReply {
		t.Helper()
		tid++
		req := &MOSDOp{Tid: tid, PGID: tg.spg, Hash: tg.rawPG.Seed, Epoch: m.Epoch,
			Flags: flags | FlagOnDisk | FlagKnownRedir, Oloc: denc.ObjectLocator{Pool: tc.pool, Hash: -1}, OID: oid,
			Ops: ops, SnapID: SnapHead, Features: msgr.DefaultFeatures, MTime: denc.UTimeOf(time.Now())}
		msg := req.Message()
		sent = append(sent, msg)
		// our encoder and decoder agree
		back, err := DecodeOSDOp(msg)
		if err != nil {
			t.Fatalf("decoding our own MOSDOp: %v", err)
		}
		if back.OID != oid || len(back.Ops) != len(ops) || back.Epoch != m.Epoch {
			t.Fatalf("MOSDOp round trip: %+v", back)
		}
		for i := range ops {
			if !bytes.Equal(back.Ops[i].InData, ops[i].InData) || back.Ops[i].Args != ops[i].Args {
				t.Fatalf("MOSDOp round trip: op %d differs", i)
			}
		}
		if err := conn.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case in, ok := <-conn.Incoming():
				if !ok {
					t.Fatalf("OSD connection failed: %v", conn.Err())
				}
				seeds = append(seeds, in)
				if in.Type != MsgOSDOpReply {
					continue
				}
				r, err := DecodeOSDOpReply(in)
				if err != nil {
					t.Fatalf("decoding the OSD's reply: %v", err)
				}
				if r.Tid != tid {
					t.Fatalf("reply tid %d, want %d", r.Tid, tid)
				}
				return r
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
	}

	data := []byte("hello, osd")
	if r := roundTrip(FlagWrite, Delete()); r.Result != 0 && r.Result != -2 {
		t.Fatalf("delete: %d", r.Result)
	}
	r := roundTrip(FlagWrite, Create(true), WriteFull(data), SetXattr("a", []byte("1")), SetXattr("b", []byte("22")),
		OmapSetVals(map[string][]byte{"k1": []byte("v1"), "k2": []byte("v2"), "x": nil}), OmapSetHeader([]byte("hdr")))
	if r.Result != 0 || r.OID != oid || r.PGID != tg.pgid {
		t.Fatalf("compound write: result %d oid %q pg %v", r.Result, r.OID, r.PGID)
	}
	if r := roundTrip(FlagWrite, Create(true)); r.Result != -int32(EEXIST) {
		t.Fatalf("exclusive create of an existing object: %d", r.Result)
	}
	r = roundTrip(FlagRead, Read(0, 0), Stat(), GetXattr("b"), GetXattrs(), OmapGetKeys("", 10),
		OmapGetVals("k1", "", 10), OmapGetValsByKeys([]string{"k2", "nope", "x"}), OmapGetHeader(), SparseRead(0, 100), ListWatchers())
	if r.Result != 0 {
		t.Fatalf("compound read: %d", r.Result)
	}
	if got := r.Ops[0].OutData; !bytes.Equal(got, data) {
		t.Errorf("read %q", got)
	}
	if size, mtime, err := ParseStat(r.Ops[1].OutData); err != nil || size != uint64(len(data)) || mtime.IsZero() {
		t.Errorf("stat: %d %v %v", size, mtime, err)
	}
	if got := string(r.Ops[2].OutData); got != "22" {
		t.Errorf("getxattr: %q", got)
	}
	if xs, err := ParseXattrs(r.Ops[3].OutData); err != nil || string(xs["a"]) != "1" || string(xs["b"]) != "22" {
		t.Errorf("getxattrs: %v %v", xs, err)
	}
	if keys, more, err := ParseOmapKeys(r.Ops[4].OutData); err != nil || fmt.Sprint(keys) != "[k1 k2 x]" || more {
		t.Errorf("omap keys: %v %v %v", keys, more, err)
	}
	if kvs, _, err := ParseOmapVals(r.Ops[5].OutData); err != nil || len(kvs) != 2 || kvs[0].Key != "k2" || string(kvs[0].Value) != "v2" {
		t.Errorf("omap vals after k1: %v %v", kvs, err)
	}
	if kvs, _, err := ParseOmapVals(r.Ops[6].OutData); err != nil || len(kvs) != 2 || kvs[1].Key != "x" || len(kvs[1].Value) != 0 {
		t.Errorf("omap vals by keys: %v %v", kvs, err)
	}
	if got := string(r.Ops[7].OutData); got != "hdr" {
		t.Errorf("omap header: %q", got)
	}
	if ext, d, err := ParseSparseRead(r.Ops[8].OutData); err != nil || len(ext) != 1 || !bytes.Equal(d, data) {
		t.Errorf("sparse read: %v %q %v", ext, d, err)
	}
	if ws, err := ParseWatchers(r.Ops[9].OutData); err != nil || len(ws) != 0 {
		t.Errorf("watchers: %v %v", ws, err)
	}
	for i, kind := range []byte{0xff, 0, 0xff, 3, 2, 1, 1, 0xff, 4, 7} {
		if kind != 0xff {
			results = append(results, append([]byte{kind}, r.Ops[i].OutData...))
		}
	}
	// a failing op in a compound request: the request fails with its errno
	r = roundTrip(FlagRead, Stat(), GetXattr("nope"))
	if r.Result != -int32(ENODATA) || r.Ops[1].RVal != -int32(ENODATA) {
		t.Errorf("getxattr of a missing attribute: result %d rval %d", r.Result, r.Ops[1].RVal)
	}
	r = roundTrip(FlagRead, CmpXattr("a", CmpXattrEQ, CmpXattrModeString, []byte("2")))
	if r.Result != -int32(ECANCELED) {
		t.Errorf("cmpxattr mismatch: %d", r.Result)
	}
	r = roundTrip(FlagRead, Call("lock", "get_info", lockInfoRequest("lk")))
	if r.Result != 0 {
		t.Errorf("class call lock.get_info: %d", r.Result)
	}
	// a watch, and a notify from the rados CLI reaching it
	if r := roundTrip(FlagWrite|FlagRead, WatchOp(42, WatchOpWatch, 0, 30)); r.Result != 0 {
		t.Fatalf("watch: %d", r.Result)
	}
	notifyDone := make(chan error, 1)
	go func() {
		_, err := cluster.Rados(ctx, "-p", cluster.Pool, "notify", oid, "ping-from-rados")
		notifyDone <- err
	}()
	var ev *MWatchNotify
	for ev == nil {
		select {
		case in := <-conn.Incoming():
			seeds = append(seeds, in)
			if in.Type == MsgWatchNotify {
				if ev, err = DecodeWatchNotify(in); err != nil {
					t.Fatal(err)
				}
			}
		case <-ctx.Done():
			t.Fatal("no notification")
		}
	}
	// the rados tool sends its message as an encoded string
	if ev.Opcode != WatchEventNotify || ev.Cookie != 42 || string(ev.Payload) != "\x0f\x00\x00\x00ping-from-rados" {
		t.Fatalf("notification: %+v", ev)
	}
	if r := roundTrip(FlagRead, NotifyAck(ev.NotifyID, 42, []byte("pong"))); r.Result != 0 {
		t.Fatalf("notify ack: %d", r.Result)
	}
	if err := <-notifyDone; err != nil {
		t.Fatalf("rados notify: %v", err)
	}
	if r := roundTrip(FlagWrite, WatchOp(42, WatchOpUnwatch, 0, 0), Delete()); r.Result != 0 {
		t.Fatalf("unwatch+delete: %d", r.Result)
	}
	mapMsg, err := tc.mc.RequestOSDMap(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if mm, err := DecodeOSDMapMessage(mapMsg); err != nil || len(mm.Maps) != 1 {
		t.Fatalf("MOSDMap from the monitors: %v, %v", mm, err)
	}
	seeds = append(seeds, mapMsg)
	lrep, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, PG: &denc.PG{Pool: uint64(tc.pool), Seed: 0},
		Ops: []OSDOp{PGNLS(100, MinHObject(), m.Epoch)}})
	if err != nil {
		t.Fatalf("pgnls: %v", err)
	}
	if _, _, err := ParseNLSResponse(lrep.Ops[0].OutData); err != nil {
		t.Fatalf("pgnls: %v", err)
	}
	results = append(results, append([]byte{5}, lrep.Ops[0].OutData...))
	if os.Getenv("PURERBD_WRITE_SEEDS") != "" {
		writeSeeds(t, seeds, sent, results)
	}
}

// lockInfoRequest encodes cls_lock_get_info_op for lock name.
func lockInfoRequest(name string) []byte {
	e := denc.NewEncoder(nil)
	e.Versioned(1, 1, func(e *denc.Encoder) { e.String(name) })
	return e.Bytes()
}

// writeSeeds stores the messages received and sent and the operation
// outputs as fuzz seeds.
func writeSeeds(t *testing.T, received, sent []*msgr.Message, results [][]byte) {
	dirs := map[uint16]string{MsgOSDOpReply: "FuzzOSDOpReply", MsgWatchNotify: "FuzzWatchNotify",
		MsgOSDMap: "FuzzOSDMapMessage", MsgOSDOp: "FuzzOSDOp"}
	for i, m := range append(received, sent...) {
		dir, ok := dirs[m.Type]
		if !ok {
			continue
		}
		from := "osd"
		switch m.Type {
		case MsgOSDMap:
			from = "mon"
		case MsgOSDOp:
			from = "purerbd"
		}
		writeSeed(t, dir, fmt.Sprintf("%s-%02d", from, i), m)
	}
	// OSDs rarely back off; these are encodings of ours.
	pg := denc.SPG{PG: denc.PG{Pool: 1, Seed: 3}, Shard: denc.NoShard}
	for i, b := range []*MOSDBackoff{
		{PGID: pg, Epoch: 20, Op: BackoffBlock, ID: 5, Begin: HObject{OID: "a", Hash: 0x10, Pool: 1, Snap: SnapHead}, End: HObject{OID: "z", Hash: 0x20, Pool: 1, Snap: SnapHead}},
		{PGID: pg, Epoch: 21, Op: BackoffUnblock, ID: 5, Begin: MinHObject(), End: MaxHObject()},
	} {
		writeSeed(t, "FuzzOSDBackoff", fmt.Sprintf("purerbd-%02d", i), b.Message())
	}
	for i, r := range results {
		p := filepath.Join("testdata", "fuzz", "FuzzOpResults")
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(r)))
		if err := os.WriteFile(filepath.Join(p, fmt.Sprintf("osd-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func writeSeed(t *testing.T, dir, name string, m *msgr.Message) {
	p := filepath.Join("testdata", "fuzz", dir)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf("go test fuzz v1\nuint16(%d)\n[]byte(%s)\n[]byte(%s)\n", m.Version, strconv.Quote(string(m.Front)), strconv.Quote(string(m.Data)))
	if err := os.WriteFile(filepath.Join(p, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
