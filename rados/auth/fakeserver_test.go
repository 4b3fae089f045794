package auth

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
)

// fakeCephxServer is a test-only stand-in for the server side of cephx
// (monitor and OSD), written from the wire formats, so the client's
// reclaim, renewal and authorizer paths run offline and deterministically.
// The live monitor tests in rados/msgr are the real check.
type fakeCephxServer struct {
	t          *testing.T
	clientName denc.AuthName
	clientKey  CryptoKey
	secrets    map[denc.EntityType]CryptoKey // rotating service secrets
	challenge  uint64
	nextGID    uint64
	validity   denc.UTime
	connSecret []byte
	// mint makes the server's keys (session keys, service secrets), so
	// the same flows run with AES and aes256k keys.
	mint func(seed byte) CryptoKey
}

func newFakeCephxServer(t *testing.T, name denc.AuthName, key CryptoKey) *fakeCephxServer {
	mint := testKey
	if key.Type == KeyTypeAES256K {
		mint = testKey256
	}
	return &fakeCephxServer{
		t: t, clientName: name, clientKey: key, mint: mint,
		secrets: map[denc.EntityType]CryptoKey{
			denc.EntityTypeAuth: mint(100), denc.EntityTypeMon: mint(110),
			denc.EntityTypeOSD: mint(120), denc.EntityTypeMgr: mint(130),
		},
		challenge: 0x1122334455667788, nextGID: 4100, validity: denc.UTime{Sec: 3600},
		connSecret: []byte("0123456789abcdef0123456789abcdef01234567"),
	}
}

// ticketFor makes a ticket blob for service holding sessionKey.
func (s *fakeCephxServer) ticketFor(service denc.EntityType, gid uint64, sessionKey CryptoKey) CephXTicketBlob {
	blob, err := seal(s.secrets[service], usageTicketInfo, CephXServiceTicketInfo{
		Ticket:     AuthTicket{Name: s.clientName, GlobalID: gid, OldAuid: ^uint64(0)},
		SessionKey: sessionKey,
	}.Encode)
	if err != nil {
		s.t.Fatal(err)
	}
	return CephXTicketBlob{SecretID: 1, Blob: blob}
}

// readTicket opens a ticket blob as service would.
func (s *fakeCephxServer) readTicket(service denc.EntityType, tb CephXTicketBlob) (CephXServiceTicketInfo, error) {
	d, err := open(s.secrets[service], usageTicketInfo, tb.Blob)
	if err != nil {
		return CephXServiceTicketInfo{}, err
	}
	var info CephXServiceTicketInfo
	info.Decode(d)
	return info, d.Err()
}

// ticketReply encodes a CephXServiceTicketReply for services, sealed for
// the client with principal; blobs are sealed with encKey when given.
func (s *fakeCephxServer) ticketReply(e *denc.Encoder, principal CryptoKey, services []denc.EntityType,
	gid uint64, keys map[denc.EntityType]CryptoKey, encKey *CryptoKey) {
	e.U8(1)
	e.U32(uint32(len(services)))
	for i, svc := range services {
		sk := s.mint(byte(50 + 10*i + int(gid%7)))
		keys[svc] = sk
		e.U32(uint32(svc))
		e.U8(1)
		sealed, err := sealBlob(principal, usageTicketSessionKey, CephXServiceTicket{SessionKey: sk, Validity: s.validity}.Encode)
		if err != nil {
			s.t.Fatal(err)
		}
		e.Raw(sealed)
		tb := denc.NewEncoder(nil)
		s.ticketFor(svc, gid, sk).Encode(tb)
		if encKey != nil {
			e.Bool(true)
			sealed, err := sealBlob(*encKey, usageTicketBlob, func(e *denc.Encoder) { e.Blob(tb.Bytes()) })
			if err != nil {
				s.t.Fatal(err)
			}
			e.Raw(sealed)
		} else {
			e.Bool(false)
			e.Blob(tb.Bytes())
		}
	}
}

// monAuth runs the monitor side of a handshake with h and returns the
// AUTH_DONE global id and payload.
func (s *fakeCephxServer) monAuth(h Handler) (uint64, []byte, error) {
	req, err := h.Request()
	if err != nil {
		return 0, nil, err
	}
	d := denc.NewDecoder(req)
	if m := d.U8("mode"); m != authModeMon {
		s.t.Fatalf("mode %d", m)
	}
	var name denc.AuthName
	name.Decode(d)
	gid := d.U64("gid")
	d.End("request")
	if d.Err() != nil || name != s.clientName {
		s.t.Fatalf("request: %v name %v", d.Err(), name)
	}
	more, err := h.More(denc.Marshal(CephXServerChallenge{ServerChallenge: s.challenge}))
	if err != nil {
		return 0, nil, err
	}
	reply, newGID, err := s.handleAuthenticate(more, gid)
	return newGID, reply, err
}

// handleAuthenticate checks a GET_AUTH_SESSION_KEY request and builds the
// reply (AUTH ticket, connection secret, service tickets).
func (s *fakeCephxServer) handleAuthenticate(req []byte, gid uint64) ([]byte, uint64, error) {
	d := denc.NewDecoder(req)
	var hdr CephXRequestHeader
	hdr.Decode(d)
	var a CephXAuthenticate
	a.Decode(d)
	d.End("authenticate")
	if d.Err() != nil || hdr.RequestType != cephxGetAuthSessionKey || a.Version != 3 {
		s.t.Fatalf("authenticate: %v %+v", d.Err(), hdr)
	}
	want, err := challengeProof(s.clientKey, s.challenge, a.ClientChallenge)
	if err != nil {
		s.t.Fatal(err)
	}
	e := denc.NewEncoder(nil)
	if a.Key != want {
		CephXResponseHeader{RequestType: cephxGetAuthSessionKey, Status: -13}.Encode(e)
		return e.Bytes(), 0, nil
	}
	var encKey *CryptoKey
	switch {
	case len(a.OldTicket.Blob) > 0:
		info, err := s.readTicket(denc.EntityTypeAuth, a.OldTicket)
		if err != nil || info.Ticket.GlobalID != gid {
			return nil, 0, fmt.Errorf("fake mon: bad old ticket (%v) for gid %d", err, gid)
		}
		encKey = &info.SessionKey
	case gid != 0:
		return nil, 0, fmt.Errorf("fake mon: attempt to reclaim global_id %d without presenting ticket", gid)
	default:
		gid = s.nextGID
		s.nextGID++
	}
	keys := map[denc.EntityType]CryptoKey{}
	CephXResponseHeader{RequestType: cephxGetAuthSessionKey}.Encode(e)
	s.ticketReply(e, s.clientKey, []denc.EntityType{denc.EntityTypeAuth}, gid, keys, encKey)
	authKey := keys[denc.EntityTypeAuth]
	cs, err := sealBlob(authKey, usageAuthConnectionSecret, func(e *denc.Encoder) { e.Blob(s.connSecret) })
	if err != nil {
		s.t.Fatal(err)
	}
	e.Blob(cs)
	var svcs []denc.EntityType
	for bit := denc.EntityType(1); bit < denc.EntityTypeAuth; bit <<= 1 {
		if denc.EntityType(a.OtherKeys)&bit != 0 {
			svcs = append(svcs, bit)
		}
	}
	te := denc.NewEncoder(nil)
	s.ticketReply(te, authKey, svcs, gid, keys, nil)
	e.Blob(te.Bytes())
	return e.Bytes(), gid, nil
}

// osdAuth runs an OSD's side of an authorizer exchange, with a challenge.
func (s *fakeCephxServer) osdAuth(h Handler) ([]byte, error) {
	req, err := h.Request()
	if err != nil {
		return nil, err
	}
	info, au, err := s.readAuthorizer(denc.EntityTypeOSD, req)
	if err != nil {
		return nil, err
	}
	if au.HaveChallenge {
		s.t.Fatal("challenge answered before being asked")
	}
	ch, err := seal(info.SessionKey, usageAuthorizeChallenge, CephXAuthorizeChallenge{ServerChallenge: 777}.Encode)
	if err != nil {
		s.t.Fatal(err)
	}
	req, err = h.More(ch)
	if err != nil {
		return nil, err
	}
	info, au, err = s.readAuthorizer(denc.EntityTypeOSD, req)
	if err != nil {
		return nil, err
	}
	if !au.HaveChallenge || au.ServerChallengePlusOne != 778 {
		return nil, fmt.Errorf("fake osd: challenge answer %+v", au)
	}
	return sealBlob(info.SessionKey, usageAuthorizeReply, CephXAuthorizeReply{NoncePlusOne: au.Nonce + 1, ConnectionSecret: s.connSecret}.Encode)
}

// readAuthorizer decodes an authorizer for service.
func (s *fakeCephxServer) readAuthorizer(service denc.EntityType, b []byte) (CephXServiceTicketInfo, CephXAuthorize, error) {
	d := denc.NewDecoder(b)
	d.U8("v")
	d.U64("gid")
	if svc := denc.EntityType(d.U32("service")); svc != service {
		s.t.Fatalf("authorizer for %s", svc)
	}
	var tb CephXTicketBlob
	tb.Decode(d)
	info, err := s.readTicket(service, tb)
	if err != nil {
		return info, CephXAuthorize{}, fmt.Errorf("fake %s: ticket: %w", service, err)
	}
	ad, err := openBlob(info.SessionKey, usageAuthorize, d, "authorize")
	if err != nil {
		return info, CephXAuthorize{}, err
	}
	var au CephXAuthorize
	au.Decode(ad)
	d.End("authorizer")
	return info, au, d.Err()
}

func mustName(t *testing.T, s string) denc.AuthName {
	n, err := ParseName(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCephXMonThenOSD(t *testing.T) { testCephXMonThenOSD(t, testKey(1)) }

// The same flows with an aes256k client key and aes256k session keys
// (Tentacle's default): every envelope is keyed by its usage.
func TestCephXMonThenOSDAES256K(t *testing.T) { testCephXMonThenOSD(t, testKey256(1)) }

func testCephXMonThenOSD(t *testing.T, key CryptoKey) {
	name := mustName(t, "client.admin")
	cx, err := NewCephX(name, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv := newFakeCephxServer(t, name, key)
	h, err := cx.NewHandler(denc.EntityTypeMon)
	if err != nil {
		t.Fatal(err)
	}
	gid, reply, err := srv.monAuth(h)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := h.Done(gid, reply)
	if err != nil {
		t.Fatal(err)
	}
	if sess.GlobalID != 4100 || cx.GlobalID() != 4100 || len(sess.SessionKey) != len(key.Secret()) || string(sess.ConnectionSecret) != string(srv.connSecret) {
		t.Fatalf("session %+v", sess)
	}
	if got := len(cx.Tickets()); got != 4 { // auth, mon, osd, mgr
		t.Fatalf("%d tickets: %+v", got, cx.Tickets())
	}
	if cx.NeedRenewal() {
		t.Fatal("fresh tickets need renewal")
	}

	oh, err := cx.NewHandler(denc.EntityTypeOSD)
	if err != nil {
		t.Fatal(err)
	}
	r, err := srv.osdAuth(oh)
	if err != nil {
		t.Fatal(err)
	}
	osess, err := oh.Done(0, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(osess.SessionKey) != len(key.Secret()) || string(osess.ConnectionSecret) != string(srv.connSecret) {
		t.Fatalf("osd session %+v", osess)
	}

	// A reply that does not carry nonce+1 is refused.
	oh2, _ := cx.NewHandler(denc.EntityTypeOSD)
	req, err := oh2.Request()
	if err != nil {
		t.Fatal(err)
	}
	info, au, err := srv.readAuthorizer(denc.EntityTypeOSD, req)
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := sealBlob(info.SessionKey, usageAuthorizeReply, CephXAuthorizeReply{NoncePlusOne: au.Nonce + 2}.Encode)
	if _, err := oh2.Done(0, bad); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("bad nonce: %v", err)
	}

	// Reconnecting to a monitor reclaims the global id with the old ticket.
	h2, _ := cx.NewHandler(denc.EntityTypeMon)
	gid2, reply2, err := srv.monAuth(h2)
	if err != nil {
		t.Fatal(err)
	}
	if gid2 != 4100 {
		t.Fatalf("reclaimed gid %d", gid2)
	}
	if _, err := h2.Done(gid2, reply2); err != nil {
		t.Fatal(err)
	}
}

func TestCephXWrongKey(t *testing.T) {
	name := mustName(t, "client.admin")
	cx, _ := NewCephX(name, testKey(2), 0)
	srv := newFakeCephxServer(t, name, testKey(1))
	h, _ := cx.NewHandler(denc.EntityTypeMon)
	gid, reply, err := srv.monAuth(h)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Done(gid, reply)
	var ae *Error
	if !errors.Is(err, ErrAuthFailed) || !errors.As(err, &ae) || ae.Entity != name {
		t.Fatalf("wrong key: %v", err)
	}
	if got := h.BadMethod(-13, []Method{MethodCephX}); !errors.Is(got, ErrAuthFailed) {
		t.Fatalf("BadMethod: %v", got)
	}
}

func TestCephXNoTicketForOSD(t *testing.T) {
	cx, _ := NewCephX(mustName(t, "admin"), testKey(1), 0)
	h, _ := cx.NewHandler(denc.EntityTypeOSD)
	if _, err := h.Request(); !errors.Is(err, ErrNoTicket) {
		t.Fatalf("got %v", err)
	}
}

// TestCephXRenewal moves the clock to force renewal of service tickets
// (principal request) and of the AUTH ticket (re-authentication).
func TestCephXRenewal(t *testing.T) {
	name := mustName(t, "client.admin")
	cx, _ := NewCephX(name, testKey(1), 0)
	now := time.Unix(1700000000, 0)
	cx.now = func() time.Time { return now }
	srv := newFakeCephxServer(t, name, testKey(1))
	h, _ := cx.NewHandler(denc.EntityTypeMon)
	gid, reply, err := srv.monAuth(h)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := h.Done(gid, reply)
	if err != nil {
		t.Fatal(err)
	}
	if sess.ServerChallenge != srv.challenge {
		t.Fatalf("session challenge %#x, the server gave %#x", sess.ServerChallenge, srv.challenge)
	}
	if req, err := cx.BuildRenewalRequest(sess.ServerChallenge); err != nil || req != nil {
		t.Fatalf("renewal of fresh tickets: %x %v", req, err)
	}

	// Drop the OSD ticket: a principal request for it alone.
	cx.Invalidate(denc.EntityTypeOSD)
	req, err := cx.BuildRenewalRequest(sess.ServerChallenge)
	if err != nil {
		t.Fatal(err)
	}
	d := denc.NewDecoder(req)
	var hdr CephXRequestHeader
	hdr.Decode(d)
	if hdr.RequestType != cephxGetPrincipalSessionKey {
		t.Fatalf("request type %#x", hdr.RequestType)
	}
	// Server: check the AUTH authorizer, then answer with an OSD ticket.
	d.U8("v")
	d.U64("gid")
	d.U32("service")
	var tb CephXTicketBlob
	tb.Decode(d)
	info, err := srv.readTicket(denc.EntityTypeAuth, tb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openBlob(info.SessionKey, usageAuthorize, d, "authorize"); err != nil {
		t.Fatal(err)
	}
	var str CephXServiceTicketRequest
	str.Decode(d)
	d.End("principal request")
	if d.Err() != nil || denc.EntityType(str.Keys) != denc.EntityTypeOSD {
		t.Fatalf("service ticket request %+v %v", str, d.Err())
	}
	e := denc.NewEncoder(nil)
	CephXResponseHeader{RequestType: cephxGetPrincipalSessionKey}.Encode(e)
	srv.ticketReply(e, info.SessionKey, []denc.EntityType{denc.EntityTypeOSD}, gid, map[denc.EntityType]CryptoKey{}, nil)
	if err := cx.HandleRenewalReply(e.Bytes()); err != nil {
		t.Fatal(err)
	}
	if cx.NeedRenewal() {
		t.Fatal("still needs renewal")
	}

	// Past 3/4 of the validity everything is due: re-authenticate.
	now = now.Add(46 * time.Minute)
	if !cx.NeedRenewal() {
		t.Fatal("old tickets do not need renewal")
	}
	req, err = cx.BuildRenewalRequest(sess.ServerChallenge)
	if err != nil {
		t.Fatal(err)
	}
	rep, gid2, err := srv.handleAuthenticate(req, gid)
	if err != nil {
		t.Fatal(err)
	}
	if gid2 != gid {
		t.Fatalf("gid %d", gid2)
	}
	if err := cx.HandleRenewalReply(rep); err != nil {
		t.Fatal(err)
	}
	if cx.NeedRenewal() {
		t.Fatal("renewed tickets need renewal")
	}
	// After expiry a reconnect asks for a new global id.
	now = now.Add(2 * time.Hour)
	h3, _ := cx.NewHandler(denc.EntityTypeMon)
	gid3, reply3, err := srv.monAuth(h3)
	if err != nil {
		t.Fatal(err)
	}
	if gid3 == gid {
		t.Fatal("expired ticket reclaimed its global id")
	}
	if _, err := h3.Done(gid3, reply3); err != nil {
		t.Fatal(err)
	}
}

// TestRenewalAnswersItsSessionsChallenge authenticates one identity to
// two monitors at once, as a failover hunt that can reclaim the global id
// does, the loser's challenge arriving after the winner's: a renewal of
// the AUTH ticket over the winner's session must answer the winner's
// challenge, or that monitor refuses it.
func TestRenewalAnswersItsSessionsChallenge(t *testing.T) {
	name := mustName(t, "client.admin")
	cx, _ := NewCephX(name, testKey(1), 0)
	first := newFakeCephxServer(t, name, testKey(1))
	h, _ := cx.NewHandler(denc.EntityTypeMon)
	gid, reply, err := first.monAuth(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Done(gid, reply); err != nil {
		t.Fatal(err)
	}

	win, lose := newFakeCephxServer(t, name, testKey(1)), newFakeCephxServer(t, name, testKey(1))
	win.challenge, lose.challenge = 0xaaaa0000aaaa0000, 0xbbbb0000bbbb0000
	hw, _ := cx.NewHandler(denc.EntityTypeMon)
	hl, _ := cx.NewHandler(denc.EntityTypeMon)
	gidW, replyW, err := win.monAuth(hw)
	if err != nil {
		t.Fatal(err)
	}
	gidL, replyL, err := lose.monAuth(hl)
	if err != nil {
		t.Fatal(err)
	}
	sessW, err := hw.Done(gidW, replyW)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hl.Done(gidL, replyL); err != nil {
		t.Fatal(err)
	}
	if gidW != gid || gidL != gid {
		t.Fatalf("global ids %d and %d, want %d reclaimed", gidW, gidL, gid)
	}

	cx.MarkForRenewal(denc.EntityTypeAuth)
	// what a CephX-wide challenge gave: the last one received, the loser's
	req, err := cx.BuildRenewalRequest(lose.challenge)
	if err != nil {
		t.Fatal(err)
	}
	rep, _, err := win.handleAuthenticate(req, gid)
	if err != nil {
		t.Fatal(err)
	}
	if err := cx.HandleRenewalReply(rep); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("renewal answering the loser's challenge: %v, want EACCES", err)
	}
	req, err = cx.BuildRenewalRequest(sessW.ServerChallenge)
	if err != nil {
		t.Fatal(err)
	}
	rep, _, err = win.handleAuthenticate(req, gid)
	if err != nil {
		t.Fatal(err)
	}
	if err := cx.HandleRenewalReply(rep); err != nil {
		t.Fatalf("the winning monitor refused the renewal: %v", err)
	}
	if cx.NeedRenewal() {
		t.Fatal("still due after the renewal")
	}
}

// TestRefusalErrno checks that a refusal carries the peer's errno and
// that only EBUSY and EAGAIN are worth retrying.
func TestRefusalErrno(t *testing.T) {
	name := mustName(t, "client.admin")
	cx, _ := NewCephX(name, testKey(1), 0)
	mon, _ := cx.NewHandler(denc.EntityTypeMon)
	osd, _ := cx.NewHandler(denc.EntityTypeOSD)
	none, _ := NewNone(name).NewHandler(denc.EntityTypeMon)
	for _, tc := range []struct {
		result int32
		errno  syscall.Errno
		retry  bool
	}{
		{-13, syscall.EACCES, false},
		{-1, syscall.EPERM, false},
		{-95, syscall.EOPNOTSUPP, false},
		{-22, syscall.EINVAL, false},
		{-16, syscall.EBUSY, true},
		{-11, syscall.EAGAIN, true},
	} {
		for _, h := range []Handler{mon, osd, none} {
			err := h.BadMethod(tc.result, []Method{MethodCephX})
			checkRefusal(t, fmt.Sprintf("BadMethod(%d)", tc.result), err, tc.errno, tc.retry)
		}
		// the status of a cephx reply to a renewal
		for _, typ := range []uint16{cephxGetAuthSessionKey, cephxGetPrincipalSessionKey} {
			e := denc.NewEncoder(nil)
			CephXResponseHeader{RequestType: typ, Status: tc.result}.Encode(e)
			err := cx.HandleRenewalReply(e.Bytes())
			checkRefusal(t, fmt.Sprintf("renewal reply %#x status %d", typ, tc.result), err, tc.errno, tc.retry)
		}
	}
}

func checkRefusal(t *testing.T, what string, err error, errno syscall.Errno, retry bool) {
	t.Helper()
	var ae *Error
	if !errors.As(err, &ae) || ae.Errno != errno || !errors.Is(err, errno) {
		t.Errorf("%s: %v does not carry %v", what, err, errno)
	}
	if errors.Is(err, ErrTryAgain) != retry || errors.Is(err, ErrAuthFailed) == retry {
		t.Errorf("%s: %v: retry %v, final %v; want retry %v", what, err,
			errors.Is(err, ErrTryAgain), errors.Is(err, ErrAuthFailed), retry)
	}
}

func TestNone(t *testing.T) {
	n := NewNone(mustName(t, "client.admin"))
	h, _ := n.NewHandler(denc.EntityTypeMon)
	req, err := h.Request()
	if err != nil {
		t.Fatal(err)
	}
	if req[0] != authModeMon {
		t.Fatalf("mode %d", req[0])
	}
	if _, err := h.Done(77, nil); err != nil || n.GlobalID() != 77 {
		t.Fatal(err)
	}
	oh, _ := n.NewHandler(denc.EntityTypeOSD)
	req, _ = oh.Request()
	d := denc.NewDecoder(req)
	d.U8("v")
	var name denc.AuthName
	name.Decode(d)
	if gid := d.U64("gid"); gid != 77 || name.String() != "client.admin" {
		t.Fatalf("authorizer %x", req)
	}
}
