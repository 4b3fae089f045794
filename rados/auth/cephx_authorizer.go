package auth

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// cephxAuthorizer authenticates to a service (OSD, manager, MDS) with an
// authorizer: the service ticket plus a nonce sealed with the ticket's
// session key. The service may challenge it once; it proves it read the
// ticket by answering with the nonce plus one.
type cephxAuthorizer struct {
	cx         *CephX
	service    denc.EntityType
	sessionKey CryptoKey
	base       []byte // global id, service id, ticket blob
	nonce      uint64
	challenged bool
}

func (a *cephxAuthorizer) Method() Method { return MethodCephX }

// Request builds the authorizer from the current service ticket. Without a
// valid ticket it fails with ErrNoTicket.
func (a *cephxAuthorizer) Request() ([]byte, error) {
	c := a.cx
	c.mu.Lock()
	t := c.tickets[a.service]
	if !t.valid(c.now()) {
		c.mu.Unlock()
		return nil, c.failure(a.service.String(), "no valid "+a.service.String()+" ticket; renew tickets with the monitors first", ErrNoTicket)
	}
	a.sessionKey = t.sessionKey
	a.base = c.authorizerBase(a.service, t)
	c.mu.Unlock()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("auth: random nonce: %w", err)
	}
	a.nonce = binary.LittleEndian.Uint64(b[:])
	return a.build(CephXAuthorize{Nonce: a.nonce})
}

// build appends the sealed CephXAuthorize to the plain part.
func (a *cephxAuthorizer) build(msg CephXAuthorize) ([]byte, error) {
	sealed, err := sealBlob(a.sessionKey, usageAuthorize, msg.Encode)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(a.base)+len(sealed))
	return append(append(out, a.base...), sealed...), nil
}

// More answers the service's challenge (sealed with the session key,
// without a length prefix) with challenge+1.
func (a *cephxAuthorizer) More(reply []byte) ([]byte, error) {
	if a.base == nil || a.challenged {
		return nil, a.cx.failure(a.service.String(), "unexpected AUTH_REPLY_MORE", ErrProtocol)
	}
	a.challenged = true
	d, err := open(a.sessionKey, usageAuthorizeChallenge, reply)
	if err != nil {
		return nil, a.cx.failure(a.service.String(), fmt.Sprintf("authorizer challenge: %v", err), ErrProtocol)
	}
	var ch CephXAuthorizeChallenge
	ch.Decode(d)
	if err := d.Err(); err != nil {
		return nil, a.cx.failure(a.service.String(), fmt.Sprintf("authorizer challenge: %v", err), ErrProtocol)
	}
	return a.build(CephXAuthorize{Nonce: a.nonce, HaveChallenge: true, ServerChallengePlusOne: ch.ServerChallenge + 1})
}

// Done checks the service's CephXAuthorizeReply: it must carry our nonce
// plus one, which only a holder of the service secret could produce.
func (a *cephxAuthorizer) Done(globalID uint64, reply []byte) (Session, error) {
	if a.base == nil {
		return Session{}, a.cx.failure(a.service.String(), "AUTH_DONE before a request", ErrProtocol)
	}
	d := denc.NewDecoder(reply)
	rd, err := openBlob(a.sessionKey, usageAuthorizeReply, d, "authorizer reply")
	if err != nil {
		return Session{}, a.cx.failure(a.service.String(), fmt.Sprintf("authorizer reply: %v", err), ErrAuthFailed)
	}
	var r CephXAuthorizeReply
	r.Decode(rd)
	if err := rd.Err(); err != nil {
		return Session{}, a.cx.failure(a.service.String(), fmt.Sprintf("authorizer reply: %v", err), ErrProtocol)
	}
	if r.NoncePlusOne != a.nonce+1 {
		return Session{}, a.cx.failure(a.service.String(), "authorizer reply does not prove the service read our ticket", ErrAuthFailed)
	}
	return Session{
		GlobalID:         a.cx.GlobalID(),
		SessionKey:       append([]byte(nil), a.sessionKey.Secret()...),
		ConnectionSecret: r.ConnectionSecret,
	}, nil
}

// BadMethod reports a refused authorizer; the ticket is dropped so the
// next renewal fetches a fresh one.
func (a *cephxAuthorizer) BadMethod(result int32, allowed []Method) error {
	if result != -95 {
		a.cx.Invalidate(a.service)
	}
	return badMethodError(a.cx.name, a.service, MethodCephX, result, allowed)
}
