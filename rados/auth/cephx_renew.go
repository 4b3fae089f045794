package auth

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// NeedRenewal reports whether any wanted ticket (AUTH or a service) is
// missing or in the last quarter of its life. The monitor client checks
// it periodically and, when true, sends BuildRenewalRequest in an MAuth
// message over its authenticated monitor session.
func (c *CephX) NeedRenewal() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.needMask() != 0
}

// BuildRenewalRequest returns the cephx payload of an MAuth renewal
// request, or nil when nothing needs renewal. When the AUTH ticket itself
// is due it re-authenticates (GET_AUTH_SESSION_KEY, answering the
// challenge of the monitor session and presenting the old ticket);
// otherwise it asks for the due service tickets with an authorizer built
// from the AUTH ticket (GET_PRINCIPAL_SESSION_KEY).
//
// serverChallenge is the Session.ServerChallenge of the monitor
// connection the request will be sent on: the monitor checks the proof
// against the challenge it gave that connection, whatever other
// connections of this identity were given.
func (c *CephX) BuildRenewalRequest(serverChallenge uint64) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	need := c.needMask()
	if need == 0 {
		return nil, nil
	}
	auth := c.tickets[denc.EntityTypeAuth]
	e := denc.NewEncoder(make([]byte, 0, 256))
	if need&denc.EntityTypeAuth != 0 || !auth.valid(c.now()) {
		var old CephXTicketBlob
		if auth != nil {
			old = auth.blob
		}
		if err := c.authenticate(e, serverChallenge, old); err != nil {
			return nil, err
		}
		return e.Bytes(), nil
	}
	CephXRequestHeader{RequestType: cephxGetPrincipalSessionKey}.Encode(e)
	e.Raw(c.authorizerBase(denc.EntityTypeAuth, auth))
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("auth: random nonce: %w", err)
	}
	sealed, err := sealBlob(auth.sessionKey, usageAuthorize, CephXAuthorize{Nonce: binary.LittleEndian.Uint64(b[:])}.Encode)
	if err != nil {
		return nil, err
	}
	e.Raw(sealed)
	CephXServiceTicketRequest{Keys: uint32(need &^ denc.EntityTypeAuth)}.Encode(e)
	return e.Bytes(), nil
}

// HandleRenewalReply processes the cephx payload of the MAuthReply to a
// renewal request and stores the tickets it carries.
func (c *CephX) HandleRenewalReply(payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := denc.NewDecoder(payload)
	var hdr CephXResponseHeader
	hdr.Decode(d)
	if err := d.Err(); err != nil {
		return c.failure("mon", fmt.Sprintf("renewal reply header: %v", err), ErrProtocol)
	}
	switch hdr.RequestType {
	case cephxGetAuthSessionKey:
		_, err := c.handleAuthReply(payload)
		return err
	case cephxGetPrincipalSessionKey:
		if hdr.Status < 0 {
			return c.refused("mon", "monitor refused service tickets", hdr.Status)
		}
		auth := c.tickets[denc.EntityTypeAuth]
		if auth == nil {
			return c.failure("mon", "service tickets without an AUTH ticket", ErrProtocol)
		}
		got, err := c.decodeTicketReply(d, auth.sessionKey, false)
		if err != nil {
			return err
		}
		c.store(got)
		return nil
	}
	return c.failure("mon", fmt.Sprintf("renewal reply to unknown request type %#x", hdr.RequestType), ErrProtocol)
}
