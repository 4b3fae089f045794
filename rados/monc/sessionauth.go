package monc

import (
	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
)

// attemptAuth is the auth.Provider of one monitor connection attempt. It
// hands out the identity's handlers and keeps what the handshake's
// authentication leaves for the session: the cephx server challenge,
// which a renewal of the AUTH ticket over that connection must answer.
// Attempts of one hunt may share an identity, and each monitor checks a
// renewal against the challenge it gave its own connection, so the
// challenge belongs to the connection, not to the identity.
type attemptAuth struct {
	auth.Provider
	// challenge is written by the handshake inside msgr.DialAddr and
	// read after it returned, by the same goroutine.
	challenge uint64
}

func (a *attemptAuth) NewHandler(peer denc.EntityType) (auth.Handler, error) {
	h, err := a.Provider.NewHandler(peer)
	if err != nil {
		return nil, err
	}
	return attemptHandler{Handler: h, a: a}, nil
}

// attemptHandler records the challenge of a successful authentication.
type attemptHandler struct {
	auth.Handler
	a *attemptAuth
}

func (h attemptHandler) Done(globalID uint64, reply []byte) (auth.Session, error) {
	s, err := h.Handler.Done(globalID, reply)
	if err == nil {
		h.a.challenge = s.ServerChallenge
	}
	return s, err
}
