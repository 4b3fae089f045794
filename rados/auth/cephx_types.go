package auth

import "github.com/purerbd/purerbd/rados/denc"

// The cephx wire structures. Each has Decode and Encode methods matching
// Ceph's encoding byte for byte; most carry a leading struct_v byte but no
// compat byte or length (cephx predates Ceph's versioned envelopes).

// cephx request types (CEPHX_GET_*), the op of CephXRequestHeader.
const (
	cephxGetAuthSessionKey      uint16 = 0x0100
	cephxGetPrincipalSessionKey uint16 = 0x0200
	cephxGetRotatingKey         uint16 = 0x0400
)

// CephXServerChallenge is the monitor's first reply: a random challenge
// the client must mix into its proof of the key.
type CephXServerChallenge struct {
	ServerChallenge uint64
}

// Decode reads the structure.
func (c *CephXServerChallenge) Decode(d *denc.Decoder) {
	d.U8("CephXServerChallenge struct_v")
	c.ServerChallenge = d.U64("server_challenge")
}

// Encode writes the structure.
func (c CephXServerChallenge) Encode(e *denc.Encoder) {
	e.U8(1)
	e.U64(c.ServerChallenge)
}

// CephXRequestHeader starts every cephx request after the challenge.
type CephXRequestHeader struct {
	RequestType uint16
}

// Decode reads the structure.
func (h *CephXRequestHeader) Decode(d *denc.Decoder) {
	h.RequestType = d.U16("CephXRequestHeader request_type")
}

// Encode writes the structure.
func (h CephXRequestHeader) Encode(e *denc.Encoder) { e.U16(h.RequestType) }

// CephXResponseHeader starts every cephx reply after the challenge.
type CephXResponseHeader struct {
	RequestType uint16
	Status      int32 // 0 or a negative errno
}

// Decode reads the structure.
func (h *CephXResponseHeader) Decode(d *denc.Decoder) {
	h.RequestType = d.U16("CephXResponseHeader request_type")
	h.Status = d.I32("CephXResponseHeader status")
}

// Encode writes the structure.
func (h CephXResponseHeader) Encode(e *denc.Encoder) {
	e.U16(h.RequestType)
	e.I32(h.Status)
}

// CephXTicketBlob is a ticket as the client holds it: opaque bytes
// encrypted with a service secret the client never sees, and the id of
// that (rotating) secret.
type CephXTicketBlob struct {
	SecretID uint64
	Blob     []byte
}

// Decode reads the structure.
func (t *CephXTicketBlob) Decode(d *denc.Decoder) {
	d.U8("CephXTicketBlob struct_v")
	t.SecretID = d.U64("CephXTicketBlob secret_id")
	t.Blob = d.BlobCopy("CephXTicketBlob blob")
}

// Encode writes the structure.
func (t CephXTicketBlob) Encode(e *denc.Encoder) {
	e.U8(1)
	e.U64(t.SecretID)
	e.Blob(t.Blob)
}

// CephXAuthenticate is the client's answer to the server challenge: its
// own challenge, the proof of its key, the ticket it held before (to
// reclaim its global_id) and the service tickets it wants as well.
type CephXAuthenticate struct {
	Version         uint8 // struct_v; Encode writes 3 when zero
	ClientChallenge uint64
	Key             uint64
	OldTicket       CephXTicketBlob
	OtherKeys       uint32 // entity type mask of wanted service tickets (v2+)
}

// Decode reads the structure.
func (a *CephXAuthenticate) Decode(d *denc.Decoder) {
	a.Version = d.U8("CephXAuthenticate struct_v")
	a.ClientChallenge = d.U64("CephXAuthenticate client_challenge")
	a.Key = d.U64("CephXAuthenticate key")
	a.OldTicket.Decode(d)
	if a.Version >= 2 {
		a.OtherKeys = d.U32("CephXAuthenticate other_keys")
	}
}

// Encode writes the structure.
func (a CephXAuthenticate) Encode(e *denc.Encoder) {
	v := a.Version
	if v == 0 {
		v = 3
	}
	e.U8(v)
	e.U64(a.ClientChallenge)
	e.U64(a.Key)
	a.OldTicket.Encode(e)
	if v >= 2 {
		e.U32(a.OtherKeys)
	}
}

// CephXChallengeBlob is what the client encrypts with its key to prove it.
type CephXChallengeBlob struct {
	ServerChallenge uint64
	ClientChallenge uint64
}

// Decode reads the structure.
func (c *CephXChallengeBlob) Decode(d *denc.Decoder) {
	c.ServerChallenge = d.U64("CephXChallengeBlob server_challenge")
	c.ClientChallenge = d.U64("CephXChallengeBlob client_challenge")
}

// Encode writes the structure.
func (c CephXChallengeBlob) Encode(e *denc.Encoder) {
	e.U64(c.ServerChallenge)
	e.U64(c.ClientChallenge)
}

// CephXServiceTicketRequest asks for service tickets.
type CephXServiceTicketRequest struct {
	Keys uint32 // entity type mask
}

// Decode reads the structure.
func (r *CephXServiceTicketRequest) Decode(d *denc.Decoder) {
	d.U8("CephXServiceTicketRequest struct_v")
	r.Keys = d.U32("CephXServiceTicketRequest keys")
}

// Encode writes the structure.
func (r CephXServiceTicketRequest) Encode(e *denc.Encoder) {
	e.U8(1)
	e.U32(r.Keys)
}

// CephXAuthorizeReply is a service's answer to an authorizer, proving the
// service could read the ticket: our nonce plus one, and (v2) the secret
// for secure-mode connections.
type CephXAuthorizeReply struct {
	NoncePlusOne     uint64
	ConnectionSecret []byte
}

// Decode reads the structure.
func (r *CephXAuthorizeReply) Decode(d *denc.Decoder) {
	v := d.U8("CephXAuthorizeReply struct_v")
	r.NoncePlusOne = d.U64("CephXAuthorizeReply nonce_plus_one")
	r.ConnectionSecret = nil
	if v >= 2 {
		r.ConnectionSecret = d.BlobCopy("CephXAuthorizeReply connection_secret")
	}
}

// Encode writes the structure (v2 when a connection secret is present).
func (r CephXAuthorizeReply) Encode(e *denc.Encoder) {
	if len(r.ConnectionSecret) == 0 {
		e.U8(1)
		e.U64(r.NoncePlusOne)
		return
	}
	e.U8(2)
	e.U64(r.NoncePlusOne)
	e.Blob(r.ConnectionSecret)
}

// CephXServiceTicket is the part of a ticket reply encrypted for the
// client: the session key to use with the service and how long it lasts.
type CephXServiceTicket struct {
	SessionKey CryptoKey
	Validity   denc.UTime // a duration
}

// Decode reads the structure.
func (t *CephXServiceTicket) Decode(d *denc.Decoder) {
	d.U8("CephXServiceTicket struct_v")
	t.SessionKey.Decode(d)
	t.Validity.Decode(d)
}

// Encode writes the structure.
func (t CephXServiceTicket) Encode(e *denc.Encoder) {
	e.U8(1)
	t.SessionKey.Encode(e)
	t.Validity.Encode(e)
}

// AuthCapsInfo holds an entity's capabilities inside a ticket.
type AuthCapsInfo struct {
	AllowAll bool
	Caps     []byte // an encoded map of service name to capability string
}

// Decode reads the structure.
func (c *AuthCapsInfo) Decode(d *denc.Decoder) {
	d.U8("AuthCapsInfo struct_v")
	c.AllowAll = d.Bool("AuthCapsInfo allow_all")
	c.Caps = d.BlobCopy("AuthCapsInfo caps")
}

// Encode writes the structure.
func (c AuthCapsInfo) Encode(e *denc.Encoder) {
	e.U8(1)
	e.Bool(c.AllowAll)
	e.Blob(c.Caps)
}

// AuthTicket is the content of a ticket blob, readable only by services.
// The client never decodes its own tickets; the type is here for
// completeness and for tests against Ceph's encodings.
type AuthTicket struct {
	Version  uint8 // struct_v; Encode writes 2 when zero
	Name     denc.AuthName
	GlobalID uint64
	OldAuid  uint64 // v2+: always CEPH_AUTH_UID_DEFAULT (all ones)
	Created  denc.UTime
	Expires  denc.UTime
	Caps     AuthCapsInfo
	Flags    uint32
}

// Decode reads the structure.
func (t *AuthTicket) Decode(d *denc.Decoder) {
	t.Version = d.U8("AuthTicket struct_v")
	t.Name.Decode(d)
	t.GlobalID = d.U64("AuthTicket global_id")
	if t.Version >= 2 {
		t.OldAuid = d.U64("AuthTicket auid")
	}
	t.Created.Decode(d)
	t.Expires.Decode(d)
	t.Caps.Decode(d)
	t.Flags = d.U32("AuthTicket flags")
}

// Encode writes the structure.
func (t AuthTicket) Encode(e *denc.Encoder) {
	v := t.Version
	if v == 0 {
		v = 2
	}
	e.U8(v)
	t.Name.Encode(e)
	e.U64(t.GlobalID)
	if v >= 2 {
		e.U64(t.OldAuid)
	}
	t.Created.Encode(e)
	t.Expires.Encode(e)
	t.Caps.Encode(e)
	e.U32(t.Flags)
}

// CephXServiceTicketInfo is what a ticket blob decrypts to, for the
// service: the ticket and the session key.
type CephXServiceTicketInfo struct {
	Ticket     AuthTicket
	SessionKey CryptoKey
}

// Decode reads the structure.
func (i *CephXServiceTicketInfo) Decode(d *denc.Decoder) {
	d.U8("CephXServiceTicketInfo struct_v")
	i.Ticket.Decode(d)
	i.SessionKey.Decode(d)
}

// Encode writes the structure.
func (i CephXServiceTicketInfo) Encode(e *denc.Encoder) {
	e.U8(1)
	i.Ticket.Encode(e)
	i.SessionKey.Encode(e)
}

// CephXAuthorizeChallenge is a service's challenge to an authorizer,
// which the client must answer with the challenge plus one.
type CephXAuthorizeChallenge struct {
	ServerChallenge uint64
}

// Decode reads the structure.
func (c *CephXAuthorizeChallenge) Decode(d *denc.Decoder) {
	d.U8("CephXAuthorizeChallenge struct_v")
	c.ServerChallenge = d.U64("CephXAuthorizeChallenge server_challenge")
}

// Encode writes the structure.
func (c CephXAuthorizeChallenge) Encode(e *denc.Encoder) {
	e.U8(1)
	e.U64(c.ServerChallenge)
}

// CephXAuthorize is the encrypted part of an authorizer.
type CephXAuthorize struct {
	Nonce                  uint64
	HaveChallenge          bool
	ServerChallengePlusOne uint64
}

// Decode reads the structure.
func (a *CephXAuthorize) Decode(d *denc.Decoder) {
	v := d.U8("CephXAuthorize struct_v")
	a.Nonce = d.U64("CephXAuthorize nonce")
	a.HaveChallenge, a.ServerChallengePlusOne = false, 0
	if v >= 2 {
		a.HaveChallenge = d.Bool("CephXAuthorize have_challenge")
		a.ServerChallengePlusOne = d.U64("CephXAuthorize server_challenge_plus_one")
	}
}

// Encode writes the structure (v2).
func (a CephXAuthorize) Encode(e *denc.Encoder) {
	e.U8(2)
	e.U64(a.Nonce)
	e.Bool(a.HaveChallenge)
	e.U64(a.ServerChallengePlusOne)
}
