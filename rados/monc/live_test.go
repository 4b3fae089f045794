package monc

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

var updateCaptures = flag.Bool("update-captures", false, "rewrite testdata/messages-16.2.15 from the test cluster")

// capturesDir holds message fronts (and data segments, *.data) captured
// from a Ceph 16.2.15 monitor by TestLiveMessages.
const capturesDir = "testdata/messages-16.2.15"

// readCapture returns a captured message front.
func readCapture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(capturesDir, name))
	if err != nil {
		t.Fatalf("capture missing (regenerate with go test -run TestLiveMessages -update-captures): %v", err)
	}
	return b
}

// TestLiveMessages speaks the monitor protocol by hand over a msgr
// connection (no Client) and decodes every kind of message the client
// handles, as the monitor sends it. With -update-captures it stores them
// as the test data and fuzz seeds of the decoders.
func TestLiveMessages(t *testing.T) {
	cl := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.Ceph(ctx, "config", "set", "client", "rbd_cache", "false"); err != nil {
		t.Fatal(err)
	}
	key, err := auth.ParseKey(cl.AdminKey)
	if err != nil {
		t.Fatal(err)
	}
	cx, err := auth.NewCephX(denc.AuthName{Type: denc.EntityTypeClient, ID: "admin"}, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	prov := &attemptAuth{Provider: cx} // keeps the session's challenge
	conn, err := msgr.Dial(ctx, cl.MonAddrs[0], msgr.Config{Auth: prov, PeerType: denc.EntityTypeMon})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	save := func(name string, m *msgr.Message) {
		if !*updateCaptures {
			return
		}
		if err := os.MkdirAll(capturesDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(capturesDir, name), m.Front, 0o644); err != nil {
			t.Fatal(err)
		}
		if len(m.Data) > 0 {
			if err := os.WriteFile(filepath.Join(capturesDir, name+".data"), m.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	send := func(m msgr.Message) {
		t.Helper()
		if err := conn.Send(ctx, &m); err != nil {
			t.Fatal(err)
		}
	}
	var held []*msgr.Message
	recv := func(typ uint16) *msgr.Message {
		t.Helper()
		for i, m := range held {
			if m.Type == typ {
				held = append(held[:i], held[i+1:]...)
				return m
			}
		}
		for {
			select {
			case m, ok := <-conn.Incoming():
				if !ok {
					t.Fatal(conn.Err())
				}
				if m.Type == typ {
					return m
				}
				held = append(held, m)
			case <-ctx.Done():
				t.Fatalf("no message of type %d", typ)
			}
		}
	}
	subscribe := func(what string) {
		send(msgr.Message{Type: msgMonSubscribe, Version: 3, CompatVersion: 1,
			Front: encodeSubscribe(map[string]subItem{what: {}}, "monc-test")})
	}
	command := func(tid uint64, fsid denc.UUID, cmd string) (commandAck, *msgr.Message) {
		t.Helper()
		send(msgr.Message{Type: msgMonCommand, Version: 1, Tid: tid, Front: encodeCommand(fsid, []string{cmd})})
		m := recv(msgMonCommandAck)
		a, err := decodeCommandAck(m.Front)
		if err != nil || m.Tid != tid || len(a.cmd) != 1 || a.cmd[0] != cmd {
			t.Fatalf("ack %v: %+v, %v", m, a, err)
		}
		return a, m
	}
	osdmap := func(what string) (osdMapEpochs, *msgr.Message) {
		t.Helper()
		m := recv(MsgOSDMap)
		ep, err := decodeOSDMapEpochs(m.Front, m.Version)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return ep, m
	}

	subscribe("config")
	m := recv(msgConfig)
	conf, err := decodeConfigMessage(m.Front)
	if err != nil || conf["rbd_cache"] != "false" {
		t.Errorf("MConfig: %v, %v", conf, err)
	}
	save("MConfig.bin", m)

	subscribe("monmap")
	m = recv(msgMonMap)
	monmap, err := decodeMonMapMessage(m.Front)
	if err != nil || monmap.FSID.String() != cl.FSID {
		t.Fatalf("MMonMap: %v, %v", monmap, err)
	}
	save("MMonMap.bin", m)
	fsid := monmap.FSID

	subscribe("osdmap")
	full, m := osdmap("full map")
	if len(full.full) != 1 || full.incLast != 0 || full.fsid != fsid || full.newest != full.fullLast {
		t.Errorf("first osdmap carries %+v", full)
	}
	save("MOSDMap-full.v4.bin", m)

	a, m := command(1, fsid, `{"prefix":"osd set","key":"noscrub"}`)
	if a.r != 0 || a.rs != "noscrub is set" {
		t.Errorf("osd set: %+v", a)
	}
	save("MMonCommandAck-osd-set.bin", m)
	inc, m := osdmap("incremental")
	if inc.incFirst != full.fullLast+1 || len(inc.full) != 0 {
		t.Errorf("incremental after e%d: %+v", full.fullLast, inc)
	}
	save("MOSDMap-inc.v4.bin", m)
	command(2, fsid, `{"prefix":"osd unset","key":"noscrub"}`)
	osdmap("incremental")

	a, m = command(3, fsid, `{"prefix":"osd pool get","pool":"nope","var":"size"}`)
	if a.r != -2 || a.rs != "unrecognized pool 'nope'" {
		t.Errorf("pool get: %+v", a)
	}
	save("MMonCommandAck-enoent.bin", m)
	a, m = command(4, fsid, `{"prefix":"osd pool ls","format":"json"}`)
	if a.r != 0 || len(m.Data) == 0 {
		t.Errorf("pool ls: %+v, %q", a, m.Data)
	}
	save("MMonCommandAck-pool-ls.bin", m)
	if _, m := command(5, denc.UUID{1}, `{"prefix":"status"}`); m != nil {
		a, _ := decodeCommandAck(m.Front)
		if a.r != -1 || a.rs != "wrong fsid" {
			t.Errorf("wrong fsid: %+v", a)
		}
	}

	send(msgr.Message{Type: msgMonGetVersion, Version: 1, Tid: 6, Front: encodeGetVersion(6, "osdmap")})
	m = recv(msgMonGetVersionReply)
	v, err := decodeVersionReply(m.Front, m.Version)
	if err != nil || v.handle != 6 || v.newest <= uint64(inc.incLast) || v.oldest != 1 {
		t.Errorf("version reply %+v, %v (osdmap e%d)", v, err, inc.incLast+1)
	}
	save("MMonGetVersionReply.v2.bin", m)

	send(msgr.Message{Type: msgMonGetOSDMap, Version: 1, Front: encodeGetOSDMap(full.fullLast, full.fullLast, 0, 0)})
	req, m := osdmap("requested")
	if !req.hasFull(full.fullLast) || len(req.full) != 1 || req.incLast != 0 {
		t.Errorf("requested e%d, got %+v", full.fullLast, req)
	}
	save("MOSDMap-requested.v4.bin", m)
	send(msgr.Message{Type: msgMonGetOSDMap, Version: 1, Front: encodeGetOSDMap(100000, 100000, 0, 0)})
	empty, m := osdmap("empty")
	if empty.last() != 0 || empty.oldest != 1 || empty.newest < inc.incLast {
		t.Errorf("requested a future epoch, got %+v", empty)
	}
	save("MOSDMap-empty.v4.bin", m)

	cx.Invalidate(denc.EntityTypeOSD)
	payload, err := cx.BuildRenewalRequest(prov.challenge)
	if err != nil {
		t.Fatal(err)
	}
	send(msgr.Message{Type: msgAuth, Version: 1, Front: encodeAuth(uint32(auth.MethodCephX), payload, monmap.Epoch)})
	m = recv(msgAuthReply)
	r, err := decodeAuthReply(m.Front)
	if err != nil || r.result != 0 || r.protocol != uint32(auth.MethodCephX) || r.globalID != conn.GlobalID() {
		t.Fatalf("renewal reply %+v, %v", r, err)
	}
	if err := cx.HandleRenewalReply(r.payload); err != nil {
		t.Fatal(err)
	}
	save("MAuthReply-renewal.bin", m)
	send(msgr.Message{Type: msgAuth, Version: 1, Front: encodeAuth(uint32(auth.MethodCephX), []byte{1, 0, 1, 0, 0}, monmap.Epoch)})
	m = recv(msgAuthReply)
	if r, err := decodeAuthReply(m.Front); err != nil || r.result >= 0 {
		t.Errorf("garbage renewal: %+v, %v", r, err)
	}
	save("MAuthReply-refused.bin", m)
}
