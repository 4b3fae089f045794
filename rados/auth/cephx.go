package auth

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
)

// DefaultServices are the service tickets a client asks for unless told
// otherwise: monitors, OSDs and managers (what librados asks for, minus
// MDS).
const DefaultServices = denc.EntityTypeMon | denc.EntityTypeOSD | denc.EntityTypeMgr

// CephX is the cephx client state of one identity: its key, its global id
// and the tickets obtained from the monitors. Monitor connections
// authenticate with it; OSD and manager connections present authorizers
// built from its service tickets. It is safe for concurrent use.
type CephX struct {
	name denc.AuthName
	key  CryptoKey
	want denc.EntityType // wanted service tickets, without Auth
	now  func() time.Time

	mu       sync.Mutex
	globalID uint64
	tickets  map[denc.EntityType]*ticket
}

// NewCephX returns the cephx state for name with its secret key. services
// is the mask of service tickets to obtain (denc.EntityTypeOSD|...); zero
// means DefaultServices.
func NewCephX(name denc.AuthName, key CryptoKey, services denc.EntityType) (*CephX, error) {
	if err := key.validate(); err != nil {
		return nil, fmt.Errorf("auth: key for %s: %w", name, err)
	}
	if services == 0 {
		services = DefaultServices
	}
	return &CephX{
		name:    name,
		key:     key,
		want:    services &^ denc.EntityTypeAuth,
		now:     time.Now,
		tickets: map[denc.EntityType]*ticket{},
	}, nil
}

// Name is the identity authenticated as.
func (c *CephX) Name() denc.AuthName { return c.name }

// GlobalID returns the global id the monitors assigned (0 before the
// first authentication).
func (c *CephX) GlobalID() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.globalID
}

// NewHandler returns the handler for one new connection: the full cephx
// authentication for a monitor, an authorizer for any other service.
func (c *CephX) NewHandler(peer denc.EntityType) (Handler, error) {
	if peer == denc.EntityTypeMon {
		return &cephxMonHandler{cx: c}, nil
	}
	switch peer {
	case denc.EntityTypeOSD, denc.EntityTypeMgr, denc.EntityTypeMDS:
		return &cephxAuthorizer{cx: c, service: peer}, nil
	}
	return nil, fmt.Errorf("auth: no cephx handler for peer type %s", peer)
}

// Tickets describes the tickets held (AUTH first, then services).
func (c *CephX) Tickets() []TicketInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []TicketInfo
	for _, s := range []denc.EntityType{denc.EntityTypeAuth, denc.EntityTypeMon, denc.EntityTypeMDS,
		denc.EntityTypeOSD, denc.EntityTypeMgr} {
		if t := c.tickets[s]; t != nil {
			out = append(out, TicketInfo{Service: s, SecretID: t.blob.SecretID, Expires: t.expires, RenewAfter: t.renewAfter})
		}
	}
	return out
}

// Invalidate forgets the ticket for service (and the AUTH ticket), so the
// next renewal fetches fresh ones. Call it when a service rejects an
// authorizer.
func (c *CephX) Invalidate(service denc.EntityType) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.tickets, service)
}

// MarkForRenewal makes the held tickets of services (a mask; include
// denc.EntityTypeAuth for the AUTH ticket) due for renewal now, while
// still valid: the next BuildRenewalRequest asks for them again. Use it
// when a service refused an authorizer built from a ticket that looked
// valid.
func (c *CephX) MarkForRenewal(services denc.EntityType) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for s, t := range c.tickets {
		if s&services != 0 && t.renewAfter.After(now) {
			t.renewAfter = now
		}
	}
}

// needMask returns the services (including Auth) whose tickets are
// missing or due for renewal. Callers hold c.mu.
func (c *CephX) needMask() denc.EntityType {
	now := c.now()
	var need denc.EntityType
	for bit := denc.EntityType(1); bit <= denc.EntityTypeAuth; bit <<= 1 {
		if (c.want|denc.EntityTypeAuth)&bit != 0 && c.tickets[bit].needsRenewal(now) {
			need |= bit
		}
	}
	return need
}

// authenticate encodes the GET_AUTH_SESSION_KEY request: a fresh client
// challenge, the proof of the key over both challenges (serverChallenge
// is the one of the monitor connection the request goes out on), the old
// AUTH ticket (empty unless reclaiming) and the wanted service tickets.
// Callers hold c.mu.
func (c *CephX) authenticate(e *denc.Encoder, serverChallenge uint64, oldTicket CephXTicketBlob) error {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("auth: random challenge: %w", err)
	}
	cc := binary.LittleEndian.Uint64(b[:])
	proof, err := challengeProof(c.key, serverChallenge, cc)
	if err != nil {
		return err
	}
	CephXRequestHeader{RequestType: cephxGetAuthSessionKey}.Encode(e)
	CephXAuthenticate{
		Version:         3,
		ClientChallenge: cc,
		Key:             proof,
		OldTicket:       oldTicket,
		OtherKeys:       uint32(c.want),
	}.Encode(e)
	return nil
}

// challengeProof computes the proof of key knowledge as Ceph does
// (cephx_calc_client_server_challenge): for an AES key, encrypt the
// challenge blob into a length-prefixed ciphertext; for an aes256k key,
// whose ciphertexts are randomised, take HMAC-SHA256 of the bare blob
// under the secret. Either way, XOR together every whole little-endian
// u64 of the result.
func challengeProof(key CryptoKey, server, client uint64) (uint64, error) {
	if err := key.validate(); err != nil {
		return 0, err
	}
	var blob []byte
	if key.Type == KeyTypeAES256K {
		e := denc.NewEncoder(make([]byte, 0, 16))
		CephXChallengeBlob{ServerChallenge: server, ClientChallenge: client}.Encode(e)
		blob = hmacSHA256(key, e.Bytes())
	} else {
		var err error
		blob, err = sealBlob(key, 0, func(e *denc.Encoder) {
			CephXChallengeBlob{ServerChallenge: server, ClientChallenge: client}.Encode(e)
		})
		if err != nil {
			return 0, err
		}
	}
	var k uint64
	for i := 0; i+8 <= len(blob); i += 8 {
		k ^= binary.LittleEndian.Uint64(blob[i:])
	}
	return k, nil
}

// authorizer encodes an authorizer for the ticket of service: the plain
// part (global id, service, ticket blob) and the sealed CephXAuthorize.
// Callers hold c.mu.
func (c *CephX) authorizerBase(service denc.EntityType, t *ticket) []byte {
	e := denc.NewEncoder(make([]byte, 0, 64+len(t.blob.Blob)))
	e.U8(1)
	e.U64(c.globalID)
	e.U32(uint32(service))
	t.blob.Encode(e)
	return e.Bytes()
}

// receivedTicket is one decoded entry of a ticket reply.
type receivedTicket struct {
	service denc.EntityType
	t       *ticket
}

// decodeTicketReply reads a CephXServiceTicketReply: a struct_v, a count
// and, per ticket, the service, the CephXServiceTicket sealed with
// principal (our key for the AUTH ticket, the AUTH session key for service
// tickets) and the ticket blob, itself sealed with the previous session
// key of that service when the server chose to. Callers hold c.mu; nothing
// is stored until the whole reply decoded.
func (c *CephX) decodeTicketReply(d *denc.Decoder, principal CryptoKey, principalIsKey bool) ([]receivedTicket, error) {
	d.U8("ticket reply struct_v")
	n := d.Count("ticket reply count", 4+1+4+1+4)
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	now := c.now()
	var out []receivedTicket
	for i := 0; i < n; i++ {
		service := denc.EntityType(d.U32("ticket service id"))
		d.U8("ticket struct_v")
		if err := d.Err(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrProtocol, err)
		}
		sd, err := openBlob(principal, usageTicketSessionKey, d, "service ticket")
		if err != nil {
			if principalIsKey && err == errDecrypt {
				return nil, c.failure("mon", "the monitor's reply does not decrypt with our key (wrong key?)", ErrAuthFailed)
			}
			return nil, c.failure("mon", fmt.Sprintf("service ticket for %s: %v", service, err), ErrProtocol)
		}
		var st CephXServiceTicket
		st.Decode(sd)
		if err := sd.Err(); err != nil {
			return nil, c.failure("mon", fmt.Sprintf("service ticket for %s: %v", service, err), ErrProtocol)
		}
		if err := st.SessionKey.validate(); err != nil {
			return nil, c.failure("mon", fmt.Sprintf("session key for %s: %v", service, err), ErrProtocol)
		}
		encrypted := d.Bool("ticket blob encrypted")
		bd := d
		if encrypted {
			old := c.tickets[service]
			if old == nil {
				return nil, c.failure("mon", fmt.Sprintf("ticket for %s sealed with a session key we do not hold", service), ErrProtocol)
			}
			bd, err = openBlob(old.sessionKey, usageTicketBlob, d, "ticket blob")
			if err != nil {
				return nil, c.failure("mon", fmt.Sprintf("ticket blob for %s: %v", service, err), ErrProtocol)
			}
		}
		tb := bd.Sub("ticket blob", int(bd.U32("ticket blob length")))
		var blob CephXTicketBlob
		blob.Decode(tb)
		bd.Adopt(tb)
		if err := bd.Err(); err != nil {
			return nil, c.failure("mon", fmt.Sprintf("ticket blob for %s: %v", service, err), ErrProtocol)
		}
		out = append(out, receivedTicket{service: service, t: newTicket(now, st.SessionKey, blob, st.Validity)})
	}
	return out, nil
}

// store keeps received tickets. Callers hold c.mu.
func (c *CephX) store(ts []receivedTicket) {
	for _, r := range ts {
		c.tickets[r.service] = r.t
	}
}

// refused builds the Error for a peer's refusal with errno result.
func (c *CephX) refused(peer, reason string, result int32) error {
	return Refused(c.name, peer, reason, result)
}

// failure builds an Error for this identity.
func (c *CephX) failure(peer, reason string, err error) error {
	return &Error{Entity: c.name, Peer: peer, Reason: reason, Err: err}
}
