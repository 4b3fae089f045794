package msgr

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
)

// Control segment payloads of the handshake and session frames. Fields
// are plain Ceph encodings in order, without envelopes.

// helloFrame is HELLO: the sender's entity type and the address it sees
// the other end at.
type helloFrame struct {
	entityType denc.EntityType
	peerAddr   denc.EntityAddr
}

func (h helloFrame) encode() []byte {
	e := denc.NewEncoder(make([]byte, 0, 64))
	e.U8(uint8(h.entityType))
	h.peerAddr.Encode(e)
	return e.Bytes()
}

func decodeHello(p []byte) (helloFrame, error) {
	var h helloFrame
	d := denc.NewDecoder(p)
	h.entityType = denc.EntityType(d.U8("hello entity type"))
	h.peerAddr.Decode(d)
	return h, controlErr("HELLO", d)
}

// authRequest is AUTH_REQUEST: method, preferred modes, auth payload.
func encodeAuthRequest(method auth.Method, modes []ConnMode, payload []byte) []byte {
	e := denc.NewEncoder(make([]byte, 0, 16+4*len(modes)+len(payload)))
	e.U32(uint32(method))
	denc.PutList(e, modes, func(e *denc.Encoder, m ConnMode) { e.U32(uint32(m)) })
	e.Blob(payload)
	return e.Bytes()
}

// encodeBlobFrame is AUTH_REQUEST_MORE (and AUTH_REPLY_MORE): a payload.
func encodeBlobFrame(payload []byte) []byte {
	e := denc.NewEncoder(make([]byte, 0, 4+len(payload)))
	e.Blob(payload)
	return e.Bytes()
}

func decodeBlobFrame(what string, p []byte) ([]byte, error) {
	d := denc.NewDecoder(p)
	b := d.Blob(what + " payload")
	return b, controlErr(what, d)
}

// authBadMethod is AUTH_BAD_METHOD.
type authBadMethod struct {
	method         auth.Method
	result         int32
	allowedMethods []auth.Method
	allowedModes   []ConnMode
}

func decodeAuthBadMethod(p []byte) (authBadMethod, error) {
	var b authBadMethod
	d := denc.NewDecoder(p)
	b.method = auth.Method(d.U32("bad method method"))
	b.result = d.I32("bad method result")
	b.allowedMethods = denc.List(d, "allowed methods", 4, func(d *denc.Decoder) auth.Method { return auth.Method(d.U32("method")) })
	b.allowedModes = denc.List(d, "allowed modes", 4, func(d *denc.Decoder) ConnMode { return ConnMode(d.U32("mode")) })
	return b, controlErr("AUTH_BAD_METHOD", d)
}

// authDone is AUTH_DONE.
type authDone struct {
	globalID uint64
	mode     ConnMode
	payload  []byte
}

func decodeAuthDone(p []byte) (authDone, error) {
	var a authDone
	d := denc.NewDecoder(p)
	a.globalID = d.U64("auth done global id")
	a.mode = ConnMode(d.U32("auth done connection mode"))
	a.payload = d.Blob("auth done payload")
	return a, controlErr("AUTH_DONE", d)
}

// clientIdent is CLIENT_IDENT.
type clientIdent struct {
	addrs     denc.EntityAddrVec
	target    denc.EntityAddr
	gid       int64
	globalSeq uint64
	features  uint64
	required  uint64
	flags     uint64
	cookie    uint64
}

func (c clientIdent) encode() []byte {
	e := denc.NewEncoder(make([]byte, 0, 128))
	c.addrs.Encode(e)
	c.target.Encode(e)
	e.I64(c.gid)
	e.U64(c.globalSeq)
	e.U64(c.features)
	e.U64(c.required)
	e.U64(c.flags)
	e.U64(c.cookie)
	return e.Bytes()
}

// serverIdent is SERVER_IDENT.
type serverIdent struct {
	addrs     denc.EntityAddrVec
	gid       int64
	globalSeq uint64
	features  uint64
	required  uint64
	flags     uint64
	cookie    uint64
}

func decodeServerIdent(p []byte) (serverIdent, error) {
	var s serverIdent
	d := denc.NewDecoder(p)
	s.addrs.Decode(d)
	s.gid = d.I64("server ident gid")
	s.globalSeq = d.U64("server ident global seq")
	s.features = d.U64("server ident features")
	s.required = d.U64("server ident required features")
	s.flags = d.U64("server ident flags")
	s.cookie = d.U64("server ident cookie")
	return s, controlErr("SERVER_IDENT", d)
}

// decodeU64 reads the payload of ACK, IDENT_MISSING_FEATURES, RETRY...
func decodeU64(what string, p []byte) (uint64, error) {
	d := denc.NewDecoder(p)
	v := d.U64(what)
	return v, controlErr(what, d)
}

// encodeStamp is the payload of KEEPALIVE2 and KEEPALIVE2_ACK.
func encodeStamp(t denc.UTime) []byte { return denc.Marshal(t) }

func decodeStamp(what string, p []byte) (denc.UTime, error) {
	d := denc.NewDecoder(p)
	var t denc.UTime
	t.Decode(d)
	return t, controlErr(what, d)
}

// controlErr wraps a decoding error as a protocol error. Trailing bytes
// are tolerated: newer peers may append fields.
func controlErr(what string, d *denc.Decoder) error {
	if err := d.Err(); err != nil {
		return fmt.Errorf("%w: decoding %s: %v", ErrProtocol, what, err)
	}
	return nil
}
