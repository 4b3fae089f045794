package auth

import (
	"fmt"
	"sync"

	"github.com/purerbd/purerbd/rados/denc"
)

// None is auth none: the client names itself and is believed. It only
// works against clusters configured to allow it. Safe for concurrent use.
type None struct {
	name denc.AuthName

	mu       sync.Mutex
	globalID uint64
}

// NewNone returns auth none for name.
func NewNone(name denc.AuthName) *None { return &None{name: name} }

// Name is the identity claimed.
func (n *None) Name() denc.AuthName { return n.name }

// GlobalID returns the global id the monitors assigned.
func (n *None) GlobalID() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.globalID
}

// NewHandler returns a handler for one connection.
func (n *None) NewHandler(peer denc.EntityType) (Handler, error) {
	return &noneHandler{n: n, peer: peer}, nil
}

type noneHandler struct {
	n    *None
	peer denc.EntityType
}

func (h *noneHandler) Method() Method { return MethodNone }

// Request sends the identity: for a monitor the mode, name and global id;
// for a service the AuthNoneAuthorizer (struct_v, name, global id).
func (h *noneHandler) Request() ([]byte, error) {
	h.n.mu.Lock()
	gid := h.n.globalID
	h.n.mu.Unlock()
	e := denc.NewEncoder(nil)
	if h.peer == denc.EntityTypeMon {
		e.U8(authModeMon)
	} else {
		e.U8(1)
	}
	h.n.name.Encode(e)
	e.U64(gid)
	return e.Bytes(), nil
}

func (h *noneHandler) More([]byte) ([]byte, error) {
	return nil, &Error{Entity: h.n.name, Peer: h.peer.String(), Reason: "unexpected AUTH_REPLY_MORE for auth none", Err: ErrProtocol}
}

// Done records the global id a monitor assigned.
func (h *noneHandler) Done(globalID uint64, _ []byte) (Session, error) {
	h.n.mu.Lock()
	defer h.n.mu.Unlock()
	if h.peer == denc.EntityTypeMon {
		h.n.globalID = globalID
	}
	return Session{GlobalID: h.n.globalID}, nil
}

func (h *noneHandler) BadMethod(result int32, allowed []Method) error {
	return badMethodError(h.n.name, h.peer, MethodNone, result, allowed)
}

// String describes the provider.
func (n *None) String() string { return fmt.Sprintf("auth none as %s", n.name) }
