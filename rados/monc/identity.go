package monc

import (
	"fmt"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
)

// identity is the authentication state of the client: one auth.CephX
// (or auth.None) with the global id and tickets it holds.
//
// Monitors hand out a global id per authentication. When several
// monitors are dialed at once with no global id to reclaim, each would
// assign its own, and a shared state would end up with whichever
// answered last, not the winner's. So such a hunt gives every attempt a
// fresh identity and keeps the winner's; a hunt that can reclaim (a
// valid AUTH ticket is held) shares the current identity, so every
// attempt asks for the same global id.
type identity struct {
	prov  auth.Provider
	cephx *auth.CephX // nil with auth none
	none  *auth.None  // nil with cephx
}

// newIdentity returns a fresh identity for cfg.
func newIdentity(cfg Config) (*identity, error) {
	if cfg.AuthNone {
		n := auth.NewNone(cfg.Name)
		return &identity{prov: n, none: n}, nil
	}
	cx, err := auth.NewCephX(cfg.Name, cfg.Key, cfg.Services)
	if err != nil {
		return nil, fmt.Errorf("monc: %w", err)
	}
	return &identity{prov: cx, cephx: cx}, nil
}

// canReclaim reports whether a new session would keep this identity's
// global id.
func (id *identity) canReclaim(now time.Time) bool {
	if id.none != nil {
		return id.none.GlobalID() != 0
	}
	for _, t := range id.cephx.Tickets() {
		if t.Service == denc.EntityTypeAuth {
			return now.Before(t.Expires)
		}
	}
	return false
}

// globalID returns the global id the identity holds.
func (id *identity) globalID() uint64 {
	if id.none != nil {
		return id.none.GlobalID()
	}
	return id.cephx.GlobalID()
}

// identity returns the client's current identity.
func (c *Client) identity() *identity { return c.id.Load() }

// providerSwitch is the auth.Provider the client hands out: it follows
// the client's current identity.
type providerSwitch struct{ c *Client }

func (p providerSwitch) Name() denc.AuthName { return p.c.cfg.Name }

func (p providerSwitch) NewHandler(peer denc.EntityType) (auth.Handler, error) {
	return p.c.identity().prov.NewHandler(peer)
}
