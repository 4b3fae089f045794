package auth

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// cephxMonHandler authenticates to a monitor: it announces the identity,
// answers the server challenge with a proof of the key, and collects the
// AUTH ticket, the service tickets and the connection secret.
type cephxMonHandler struct {
	cx        *CephX
	reclaim   bool // we announced a known global id and must present its ticket
	requested bool
	answered  bool
	// challenge is this connection's server challenge: the monitor keeps
	// it for the session, and renewals over the session answer it (see
	// Session.ServerChallenge). Several handshakes of one CephX may run
	// at once, so it lives here, not in the CephX.
	challenge uint64
}

func (h *cephxMonHandler) Method() Method { return MethodCephX }

// Request announces the identity and, when the AUTH ticket of a previous
// session is still valid, the global id it was issued for: the monitor
// then lets us keep that global id if we present the ticket (the secure
// global_id reclaim). Without a valid ticket we ask for a new global id.
func (h *cephxMonHandler) Request() ([]byte, error) {
	c := h.cx
	c.mu.Lock()
	defer c.mu.Unlock()
	h.requested = true
	gid := uint64(0)
	if c.globalID != 0 && c.tickets[denc.EntityTypeAuth].valid(c.now()) {
		gid = c.globalID
		h.reclaim = true
	}
	e := denc.NewEncoder(make([]byte, 0, 32+len(c.name.ID)))
	e.U8(authModeMon)
	c.name.Encode(e)
	e.U64(gid)
	return e.Bytes(), nil
}

// More answers the server challenge.
func (h *cephxMonHandler) More(reply []byte) ([]byte, error) {
	c := h.cx
	if !h.requested || h.answered {
		return nil, c.failure("mon", "unexpected AUTH_REPLY_MORE", ErrProtocol)
	}
	h.answered = true
	var sc CephXServerChallenge
	d := denc.NewDecoder(reply)
	sc.Decode(d)
	d.End("CephXServerChallenge")
	if err := d.Err(); err != nil {
		return nil, c.failure("mon", fmt.Sprintf("server challenge: %v", err), ErrProtocol)
	}
	h.challenge = sc.ServerChallenge
	c.mu.Lock()
	defer c.mu.Unlock()
	var old CephXTicketBlob
	if h.reclaim {
		if t := c.tickets[denc.EntityTypeAuth]; t != nil {
			old = t.blob
		}
	}
	e := denc.NewEncoder(make([]byte, 0, 64+len(old.Blob)))
	if err := c.authenticate(e, h.challenge, old); err != nil {
		return nil, err
	}
	return e.Bytes(), nil
}

// Done reads the monitor's final reply: a CephXResponseHeader, the ticket
// reply sealed with our key (the AUTH ticket), then the connection secret
// and the service tickets, both sealed with the new AUTH session key.
func (h *cephxMonHandler) Done(globalID uint64, reply []byte) (Session, error) {
	c := h.cx
	if !h.answered {
		return Session{}, c.failure("mon", "AUTH_DONE before the challenge was answered", ErrProtocol)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	secret, err := c.handleAuthReply(reply)
	if err != nil {
		return Session{}, err
	}
	c.globalID = globalID
	auth := c.tickets[denc.EntityTypeAuth]
	return Session{
		GlobalID:         globalID,
		SessionKey:       append([]byte(nil), auth.sessionKey.Secret()...),
		ConnectionSecret: secret,
		ServerChallenge:  h.challenge,
	}, nil
}

// handleAuthReply processes a GET_AUTH_SESSION_KEY reply (from AUTH_DONE
// or from an MAuth renewal) and returns the connection secret it carried,
// if any. Callers hold c.mu.
func (c *CephX) handleAuthReply(reply []byte) ([]byte, error) {
	d := denc.NewDecoder(reply)
	var hdr CephXResponseHeader
	hdr.Decode(d)
	if err := d.Err(); err != nil {
		return nil, c.failure("mon", fmt.Sprintf("reply header: %v", err), ErrProtocol)
	}
	if hdr.Status < 0 {
		return nil, c.refused("mon", "monitor refused", hdr.Status)
	}
	if hdr.RequestType != cephxGetAuthSessionKey {
		return nil, c.failure("mon", fmt.Sprintf("reply to request type %#x, want %#x", hdr.RequestType, cephxGetAuthSessionKey), ErrProtocol)
	}
	got, err := c.decodeTicketReply(d, c.key, true)
	if err != nil {
		return nil, err
	}
	var authTicket *ticket
	for _, r := range got {
		if r.service == denc.EntityTypeAuth {
			authTicket = r.t
		}
	}
	if authTicket == nil {
		return nil, c.failure("mon", "reply holds no AUTH ticket", ErrProtocol)
	}
	var secret []byte
	var services []receivedTicket
	if d.Remaining() > 0 {
		// Nautilus and later: the connection secret and the service
		// tickets asked for with other_keys follow, sealed with the new
		// AUTH session key.
		sb := d.Sub("connection secret", int(d.U32("connection secret length")))
		if err := d.Err(); err != nil {
			return nil, c.failure("mon", fmt.Sprintf("connection secret: %v", err), ErrProtocol)
		}
		if sb.Remaining() > 0 {
			sd, err := openBlob(authTicket.sessionKey, usageAuthConnectionSecret, sb, "connection secret")
			if err != nil {
				return nil, c.failure("mon", fmt.Sprintf("connection secret: %v", err), ErrProtocol)
			}
			secret = sd.BlobCopy("connection secret")
			if err := sd.Err(); err != nil {
				return nil, c.failure("mon", fmt.Sprintf("connection secret: %v", err), ErrProtocol)
			}
		}
		td := d.Sub("service tickets", int(d.U32("service tickets length")))
		if err := d.Err(); err != nil {
			return nil, c.failure("mon", fmt.Sprintf("service tickets: %v", err), ErrProtocol)
		}
		if td.Remaining() > 0 {
			services, err = c.decodeTicketReply(td, authTicket.sessionKey, false)
			if err != nil {
				return nil, err
			}
		}
	}
	c.store(got)
	c.store(services)
	return secret, nil
}

// BadMethod reports a refused authentication.
func (h *cephxMonHandler) BadMethod(result int32, allowed []Method) error {
	return badMethodError(h.cx.name, denc.EntityTypeMon, MethodCephX, result, allowed)
}
