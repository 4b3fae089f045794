package msgr

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/radostest"
)

// These tests run against a real Ceph 16.2 cluster booted by radostest:
// one monitor, one OSD, cephx required except that clients may also use
// auth none (to test it).
var cluster *radostest.Cluster

func TestMain(m *testing.M) {
	// Fuzzing runs (the coordinator and each worker process) exercise
	// decoders only: they do not boot a cluster.
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.fuzz") {
			os.Exit(m.Run())
		}
	}
	os.Exit(radostest.Main(m, radostest.Options{
		Conf: map[string]string{"auth_service_required": "cephx, none"},
	}, &cluster))
}

// requireCluster fails a live test run without a cluster (only fuzzing
// runs have none); under -short it skips the test.
func requireCluster(t testing.TB) {
	t.Helper()
	radostest.SkipShort(t)
	if cluster == nil {
		t.Fatal("no Ceph cluster: live tests cannot run in a fuzzing run (use -run to select fuzz targets only)")
	}
}

// Message types used by the tests.
const (
	msgMonMap    = 4  // CEPH_MSG_MON_MAP
	msgMonGetMap = 5  // CEPH_MSG_MON_GET_MAP
	msgAuth      = 17 // CEPH_MSG_AUTH
	msgAuthReply = 18 // CEPH_MSG_AUTH_REPLY
)

func adminName(t testing.TB) denc.AuthName {
	n, err := auth.ParseName("client.admin")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func adminCephX(t testing.TB) *auth.CephX {
	t.Helper()
	key, err := auth.ParseKey(cluster.AdminKey)
	if err != nil {
		t.Fatal(err)
	}
	cx, err := auth.NewCephX(adminName(t), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	return cx
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func dialMon(t testing.TB, p auth.Provider, mode Mode) *Conn {
	t.Helper()
	c, err := Dial(ctxT(t, 10*time.Second), cluster.MonAddrs[0], Config{Auth: p, PeerType: denc.EntityTypeMon, Mode: mode})
	if err != nil {
		t.Fatalf("dial mon: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// receive waits for the next message of type typ, skipping others.
func receive(t testing.TB, c *Conn, typ uint16) *Message {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-c.Incoming():
			if !ok {
				t.Fatalf("connection ended while waiting for type %d: %v", typ, c.Err())
			}
			if m.Type == typ {
				return m
			}
		case <-timeout:
			t.Fatalf("no message of type %d within 10 s", typ)
		}
	}
}

// checkMonMap sends MMonGetMap and checks the MMonMap reply carries this
// cluster's fsid.
func checkMonMap(t testing.TB, c *Conn) {
	t.Helper()
	if err := c.Send(ctxT(t, 10*time.Second), &Message{Type: msgMonGetMap, Version: 1}); err != nil {
		t.Fatalf("send MMonGetMap: %v", err)
	}
	m := receive(t, c, msgMonMap)
	// Front: a bufferlist holding the encoded MonMap, whose envelope is
	// followed by the fsid.
	d := denc.NewDecoder(m.Front)
	mm := denc.NewDecoder(d.Blob("monmap"))
	var fsid []byte
	mm.Versioned("MonMap", 9, func(d *denc.Decoder, v uint8) { fsid = d.Raw("fsid", 16) })
	if err := mm.Err(); err != nil {
		t.Fatalf("decoding MMonMap: %v", err)
	}
	want := strings.ReplaceAll(cluster.FSID, "-", "")
	if got := hex.EncodeToString(fsid); got != want {
		t.Fatalf("monmap fsid %s, want %s", got, want)
	}
}

func TestMonSession(t *testing.T) {
	requireCluster(t)
	for _, tc := range []struct {
		mode Mode
		want ConnMode
	}{
		{ModeCRC, ConnModeCRC},
		{ModeSecure, ConnModeSecure},
		{ModePreferCRC, ConnModeCRC},
		{ModePreferSecure, ConnModeSecure},
		{ModeDefault, ConnModeSecure}, // Ceph clients prefer secure with monitors
	} {
		t.Run(tc.want.String()+fmt.Sprint(tc.mode), func(t *testing.T) {
			c := dialMon(t, adminCephX(t), tc.mode)
			if c.Mode() != tc.want {
				t.Fatalf("mode %s, want %s", c.Mode(), tc.want)
			}
			if c.GlobalID() == 0 || c.PeerName().Type != denc.EntityTypeMon || len(c.PeerAddrs()) == 0 {
				t.Fatalf("gid %d peer %s %s", c.GlobalID(), c.PeerName(), c.PeerAddrs())
			}
			if c.Features()&DefaultFeatures != c.Features() || c.Features() == 0 {
				t.Fatalf("features %#x", c.Features())
			}
			checkMonMap(t, c)
			checkMonMap(t, c) // and again on the same session
			c.Close()
			if !errors.Is(c.Err(), ErrClosed) {
				t.Fatalf("after Close: %v", c.Err())
			}
			if _, ok := <-c.Incoming(); ok {
				t.Fatal("Incoming still open after Close")
			}
		})
	}
}

// TestGlobalIDReclaim reconnects with the tickets of the first session:
// the monitor lets us keep our global id only if we present the old AUTH
// ticket (it refuses insecure reclaim), so equal ids prove we do.
func TestGlobalIDReclaim(t *testing.T) {
	requireCluster(t)
	cx := adminCephX(t)
	c1 := dialMon(t, cx, ModeSecure)
	c1.Close()
	c2 := dialMon(t, cx, ModeCRC)
	if c1.GlobalID() != c2.GlobalID() {
		t.Fatalf("global id %d then %d", c1.GlobalID(), c2.GlobalID())
	}
	checkMonMap(t, c2)
	c3 := dialMon(t, adminCephX(t), ModeCRC)
	if c3.GlobalID() == c2.GlobalID() {
		t.Fatal("a new identity got the same global id")
	}
}

func TestAuthNone(t *testing.T) {
	requireCluster(t)
	none := auth.NewNone(adminName(t))
	c := dialMon(t, none, ModePreferSecure)
	if c.Mode() != ConnModeCRC {
		t.Fatalf("auth none in %s mode", c.Mode())
	}
	checkMonMap(t, c)
	if none.GlobalID() == 0 {
		t.Fatal("no global id")
	}
	_, err := Dial(ctxT(t, 10*time.Second), cluster.MonAddrs[0], Config{Auth: none, PeerType: denc.EntityTypeMon, Mode: ModeSecure})
	if !errors.Is(err, ErrModeRefused) {
		t.Fatalf("auth none in secure mode: %v", err)
	}
	// The OSD accepts auth none too.
	oc, err := Dial(ctxT(t, 10*time.Second), osdAddr(t), Config{Auth: none, PeerType: denc.EntityTypeOSD})
	if err != nil {
		t.Fatal(err)
	}
	oc.Close()
}

func TestWrongKey(t *testing.T) {
	requireCluster(t)
	good := cluster.AdminKey
	bad := auth.NewCryptoKey(auth.KeyTypeAES, denc.UTime{}, []byte("0123456789abcdef"))
	for _, id := range []string{"client.admin", "client.nobody"} {
		name, _ := auth.ParseName(id)
		cx, err := auth.NewCephX(name, bad, 0)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		_, err = Dial(ctxT(t, 10*time.Second), cluster.MonAddrs[0], Config{Auth: cx, PeerType: denc.EntityTypeMon})
		if !errors.Is(err, auth.ErrAuthFailed) {
			t.Fatalf("%s with a wrong key: %v", id, err)
		}
		var ae *auth.Error
		if !errors.As(err, &ae) || ae.Entity != name || !strings.Contains(err.Error(), id) {
			t.Fatalf("error does not name %s: %v", id, err)
		}
		if strings.Contains(err.Error(), good) || strings.Contains(err.Error(), "0123456789abcdef") {
			t.Fatalf("error reveals a key: %v", err)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("failing took %v", d)
		}
		t.Logf("%s: %v", id, err)
	}
}

// osdAddr returns osd.0's msgr2 address with its nonce.
func osdAddr(t testing.TB) string {
	t.Helper()
	out, err := cluster.Ceph(ctxT(t, 30*time.Second), "osd", "dump", "-f", "json")
	if err != nil {
		t.Fatalf("ceph osd dump: %v", err)
	}
	var dump struct {
		OSDs []struct {
			PublicAddrs struct {
				AddrVec []struct {
					Type  string `json:"type"`
					Addr  string `json:"addr"`
					Nonce uint32 `json:"nonce"`
				} `json:"addrvec"`
			} `json:"public_addrs"`
		} `json:"osds"`
	}
	if err := json.Unmarshal(out, &dump); err != nil {
		t.Fatal(err)
	}
	for _, a := range dump.OSDs[0].PublicAddrs.AddrVec {
		if a.Type == "v2" {
			return fmt.Sprintf("v2:%s/%d", a.Addr, a.Nonce)
		}
	}
	t.Fatal("osd.0 has no v2 address")
	return ""
}

// countingProvider counts the auth rounds of the handlers it hands out.
type countingProvider struct {
	auth.Provider
	more atomic.Int32
}

func (p *countingProvider) NewHandler(peer denc.EntityType) (auth.Handler, error) {
	h, err := p.Provider.NewHandler(peer)
	return countingHandler{h, &p.more}, err
}

type countingHandler struct {
	auth.Handler
	more *atomic.Int32
}

func (h countingHandler) More(b []byte) ([]byte, error) {
	h.more.Add(1)
	return h.Handler.More(b)
}

func TestOSDSession(t *testing.T) {
	requireCluster(t)
	cx := adminCephX(t)
	dialMon(t, cx, ModeDefault) // obtains the OSD ticket
	addr := osdAddr(t)
	for _, mode := range []Mode{ModeCRC, ModeSecure} {
		cp := &countingProvider{Provider: cx}
		c, err := Dial(ctxT(t, 10*time.Second), addr, Config{
			Auth: cp, PeerType: denc.EntityTypeOSD, Mode: mode, KeepaliveInterval: 50 * time.Millisecond,
		})
		if err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		if cp.more.Load() != 1 {
			t.Errorf("%v: %d authorizer challenges, want 1", mode, cp.more.Load())
		}
		deadline := time.Now().Add(5 * time.Second)
		for c.LastKeepaliveAck().IsZero() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if c.LastKeepaliveAck().IsZero() || c.Err() != nil {
			t.Fatalf("%v: no keepalive ack (%v)", mode, c.Err())
		}
		if c.PeerName().Type != denc.EntityTypeOSD || c.PeerName().Num != 0 {
			t.Errorf("peer %s", c.PeerName())
		}
		c.Close()
	}
	// Without an OSD ticket there is nothing to present.
	_, err := Dial(ctxT(t, 10*time.Second), addr, Config{Auth: adminCephX(t), PeerType: denc.EntityTypeOSD})
	if !errors.Is(err, auth.ErrNoTicket) {
		t.Fatalf("OSD without ticket: %v", err)
	}
}

// mauth encodes an MAuth carrying a cephx payload (what the monitor
// client does for ticket renewal).
func mauth(payload []byte) *Message {
	e := denc.NewEncoder(nil)
	e.U64(0)  // PaxosServiceMessage version
	e.I16(-1) // deprecated session_mon
	e.U64(0)  // deprecated session_mon_tid
	e.U32(uint32(auth.MethodCephX))
	e.Blob(payload)
	e.U32(0) // monmap epoch
	return &Message{Type: msgAuth, Version: 1, Front: e.Bytes()}
}

// challengeProvider keeps the server challenge of its last monitor
// handshake, as the monitor client keeps it per session for renewals.
type challengeProvider struct {
	auth.Provider
	challenge atomic.Uint64
}

func (p *challengeProvider) NewHandler(peer denc.EntityType) (auth.Handler, error) {
	h, err := p.Provider.NewHandler(peer)
	return challengeHandler{h, p}, err
}

type challengeHandler struct {
	auth.Handler
	p *challengeProvider
}

func (h challengeHandler) Done(globalID uint64, reply []byte) (auth.Session, error) {
	s, err := h.Handler.Done(globalID, reply)
	h.p.challenge.Store(s.ServerChallenge)
	return s, err
}

// renew runs one renewal round trip over the monitor session c, whose
// handshake received challenge.
func renew(t *testing.T, cx *auth.CephX, challenge uint64, c *Conn) {
	t.Helper()
	req, err := cx.BuildRenewalRequest(challenge)
	if err != nil || req == nil {
		t.Fatalf("renewal request %x: %v", req, err)
	}
	if err := c.Send(ctxT(t, 10*time.Second), mauth(req)); err != nil {
		t.Fatal(err)
	}
	m := receive(t, c, msgAuthReply)
	d := denc.NewDecoder(m.Front)
	d.U32("protocol")
	result := d.I32("result")
	d.U64("global id")
	payload := d.Blob("payload")
	if err := d.Err(); err != nil || result != 0 {
		t.Fatalf("MAuthReply result %d: %v", result, err)
	}
	if err := cx.HandleRenewalReply(payload); err != nil {
		t.Fatal(err)
	}
}

func TestTicketRenewal(t *testing.T) {
	requireCluster(t)
	cx := adminCephX(t)
	cp := &challengeProvider{Provider: cx}
	c := dialMon(t, cp, ModeSecure)
	before := map[denc.EntityType]auth.TicketInfo{}
	for _, ti := range cx.Tickets() {
		before[ti.Service] = ti
	}
	// Service tickets: GET_PRINCIPAL_SESSION_KEY with an AUTH authorizer.
	cx.MarkForRenewal(denc.EntityTypeOSD)
	if !cx.NeedRenewal() {
		t.Fatal("marked ticket not due")
	}
	renew(t, cx, cp.challenge.Load(), c)
	// The AUTH ticket: GET_AUTH_SESSION_KEY answering this session's
	// challenge and presenting the old ticket.
	cx.MarkForRenewal(denc.EntityTypeAuth)
	renew(t, cx, cp.challenge.Load(), c)
	if cx.NeedRenewal() {
		t.Fatal("still due after renewals")
	}
	for _, ti := range cx.Tickets() {
		if ti.Service == denc.EntityTypeOSD || ti.Service == denc.EntityTypeAuth {
			if !ti.Expires.After(before[ti.Service].Expires) {
				t.Errorf("%s ticket not renewed: %v", ti.Service, ti.Expires)
			}
		}
	}
	// The renewed tickets work.
	oc, err := Dial(ctxT(t, 10*time.Second), osdAddr(t), Config{Auth: cx, PeerType: denc.EntityTypeOSD})
	if err != nil {
		t.Fatal(err)
	}
	oc.Close()
	c2 := dialMon(t, cx, ModeCRC)
	if c2.GlobalID() != c.GlobalID() {
		t.Fatalf("global id %d after renewal, was %d", c2.GlobalID(), c.GlobalID())
	}
}

// TestManyMessages sends from many goroutines: replies arrive in order
// with consecutive sequence numbers.
func TestManyMessages(t *testing.T) {
	requireCluster(t)
	c := dialMon(t, adminCephX(t), ModeSecure)
	const n = 100
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Send(ctxT(t, 10*time.Second), &Message{Type: msgMonGetMap, Version: 1}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i := 1; i <= n; i++ {
		m := receive(t, c, msgMonMap)
		if m.Seq != uint64(i) {
			t.Fatalf("reply %d has seq %d", i, m.Seq)
		}
	}
}

// TestSendsAloneAndTogether: Sends one at a time of messages marked Alone
// (each written by its sender) and Sends together (mostly queued for the
// writer goroutine, some marked Alone) share one sequence, in both modes:
// the replies come back numbered 1..n. The connection's Counters count
// every message once, each write carrying at least one.
func TestSendsAloneAndTogether(t *testing.T) {
	requireCluster(t)
	for _, mode := range []Mode{ModeCRC, ModeSecure} {
		var counts Counters
		c, err := Dial(ctxT(t, 10*time.Second), cluster.MonAddrs[0], Config{Auth: adminCephX(t), PeerType: denc.EntityTypeMon, Mode: mode, Counters: &counts})
		if err != nil {
			t.Fatalf("dial mon: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		n := 0
		alone := func(k int) {
			for range k {
				m := &Message{Type: msgMonGetMap, Version: 1, Alone: true}
				if err := c.Send(ctxT(t, 10*time.Second), m); err != nil {
					t.Fatal(err)
				}
				n++
				if m.Seq != uint64(n) {
					t.Fatalf("mode %v: message %d sent alone got seq %d", mode, n, m.Seq)
				}
			}
		}
		together := func(k int) {
			var wg sync.WaitGroup
			for i := range k {
				wg.Go(func() {
					m := &Message{Type: msgMonGetMap, Version: 1, Alone: i%2 == 0}
					if err := c.Send(ctxT(t, 10*time.Second), m); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			n += k
		}
		alone(5)
		together(40)
		alone(5)
		together(40)
		alone(5)
		for i := 1; i <= n; i++ {
			if m := receive(t, c, msgMonMap); m.Seq != uint64(i) {
				t.Fatalf("mode %v: reply %d has seq %d", mode, i, m.Seq)
			}
		}
		// 15 messages sent alone, each in a write of its own, and two
		// groups of 40 in at least one write each
		got := counts.Load()
		if got.Messages != uint64(n) || got.Writes < 17 || got.Writes > got.Messages ||
			got.Bytes < got.Messages*(preambleLen+header2Len) {
			t.Fatalf("mode %v: counters %+v after %d messages", mode, got, n)
		}
		t.Logf("mode %v: %d messages in %d writes, %d bytes", mode, got.Messages, got.Writes, got.Bytes)
	}
}

func TestModeRefused(t *testing.T) {
	requireCluster(t)
	ctx := ctxT(t, 30*time.Second)
	if _, err := cluster.Ceph(ctx, "config", "set", "mon", "ms_mon_service_mode", "secure"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := cluster.Ceph(context.Background(), "config", "rm", "mon", "ms_mon_service_mode"); err != nil {
			t.Error(err)
		}
	})
	var err error
	for i := 0; i < 50; i++ { // the monitor applies the option asynchronously
		c, derr := Dial(ctx, cluster.MonAddrs[0], Config{Auth: adminCephX(t), PeerType: denc.EntityTypeMon, Mode: ModeCRC})
		if err = derr; err != nil {
			break
		}
		c.Close()
		time.Sleep(100 * time.Millisecond)
	}
	if !errors.Is(err, ErrModeRefused) {
		t.Fatalf("crc client against secure-only monitor: %v", err)
	}
	c := dialMon(t, adminCephX(t), ModePreferCRC)
	if c.Mode() != ConnModeSecure {
		t.Fatalf("fell back to %s", c.Mode())
	}
}

// TestHandshakeFaults: peers that hang up or go silent mid-handshake.
func TestHandshakeFaults(t *testing.T) {
	requireCluster(t)
	cfg := Config{Auth: adminCephX(t), PeerType: denc.EntityTypeMon}
	t.Run("accept-and-close", func(t *testing.T) {
		// A fake listener: the only non-Ceph peer in these tests.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		t0 := time.Now()
		_, err = Dial(ctxT(t, 5*time.Second), ln.Addr().String(), cfg)
		if !errors.Is(err, ErrPeerClosed) || time.Since(t0) > 2*time.Second {
			t.Fatalf("after %v: %v", time.Since(t0), err)
		}
	})
	t.Run("silent", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var held []net.Conn
		var mu sync.Mutex
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
		defer func() {
			mu.Lock()
			for _, c := range held {
				c.Close()
			}
			mu.Unlock()
		}()
		t0 := time.Now()
		_, err = Dial(ctxT(t, 300*time.Millisecond), ln.Addr().String(), cfg)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 2*time.Second {
			t.Fatalf("after %v: %v", time.Since(t0), err)
		}
	})
	// A real monitor whose connection is cut at points inside the
	// handshake: after the banner, inside HELLO, inside AUTH_DONE.
	for _, cut := range []int64{26, 40, 200, 400} {
		t.Run(fmt.Sprintf("cut-after-%d", cut), func(t *testing.T) {
			p := newFaultProxy(t, cluster.MonAddrs[0])
			p.cutAfter.Store(cut)
			c := cfg
			c.DialContext = p.dial
			_, err := Dial(ctxT(t, 5*time.Second), cluster.MonAddrs[0], c)
			if !errors.Is(err, ErrPeerClosed) {
				t.Fatalf("cut after %d bytes: %v", cut, err)
			}
		})
	}
}

// TestPeerDrop: an established session whose peer goes away.
func TestPeerDrop(t *testing.T) {
	requireCluster(t)
	p := newFaultProxy(t, cluster.MonAddrs[0])
	c, err := Dial(ctxT(t, 10*time.Second), cluster.MonAddrs[0], Config{Auth: adminCephX(t), PeerType: denc.EntityTypeMon, DialContext: p.dial})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checkMonMap(t, c)
	p.dropAll()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("drop not noticed")
	}
	if _, ok := <-c.Incoming(); ok {
		t.Fatal("message after drop")
	}
	if !errors.Is(c.Err(), ErrPeerClosed) {
		t.Fatalf("err %v", c.Err())
	}
	if err := c.Send(ctxT(t, time.Second), &Message{Type: msgMonGetMap}); err == nil {
		t.Fatal("send on a dead connection succeeded")
	}
	t.Log(c.Err())
}

// TestLiveness: a peer that stops answering is detected by keepalives.
func TestLiveness(t *testing.T) {
	requireCluster(t)
	p := newFaultProxy(t, cluster.MonAddrs[0])
	c, err := Dial(ctxT(t, 10*time.Second), cluster.MonAddrs[0], Config{
		Auth: adminCephX(t), PeerType: denc.EntityTypeMon, DialContext: p.dial,
		KeepaliveInterval: 50 * time.Millisecond, LivenessTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for c.LastKeepaliveAck().IsZero() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if c.Err() != nil || c.LastKeepaliveAck().IsZero() {
		t.Fatalf("healthy session: %v", c.Err())
	}
	p.blackhole.Store(true)
	t0 := time.Now()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("silence not noticed")
	}
	if d := time.Since(t0); d < 900*time.Millisecond {
		t.Fatalf("timed out after %v, before the liveness timeout", d)
	}
	if !errors.Is(c.Err(), ErrTimeout) {
		t.Fatalf("err %v", c.Err())
	}
}

// TestSlowOwner: an owner that does not read Incoming for longer than
// the liveness timeout does not make the connection fail.
func TestSlowOwner(t *testing.T) {
	requireCluster(t)
	c, err := Dial(ctxT(t, 10*time.Second), cluster.MonAddrs[0], Config{
		Auth: adminCephX(t), PeerType: denc.EntityTypeMon, IncomingQueue: 1,
		KeepaliveInterval: 50 * time.Millisecond, LivenessTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		if err := c.Send(ctxT(t, 5*time.Second), &Message{Type: msgMonGetMap, Version: 1}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // three liveness timeouts without reading
	for i := 1; i <= 3; i++ {
		if m := receive(t, c, msgMonMap); m.Seq != uint64(i) {
			t.Fatalf("seq %d", m.Seq)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
}

// TestNoGoroutineLeak: Close stops everything Dial started.
func TestNoGoroutineLeak(t *testing.T) {
	requireCluster(t)
	cx := adminCephX(t)
	before := runtime.NumGoroutine()
	for i := 0; i < 3; i++ {
		c, err := Dial(ctxT(t, 10*time.Second), cluster.MonAddrs[0], Config{Auth: cx, PeerType: denc.EntityTypeMon, KeepaliveInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		checkMonMap(t, c)
		c.Close()
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
