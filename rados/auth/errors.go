package auth

import (
	"errors"
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// ErrAuthFailed is wrapped by every error that means the peer refused our
// credentials or we could not prove them (for example a wrong key). It is
// final: retrying with the same key will not help.
var ErrAuthFailed = errors.New("authentication failed")

// ErrNoTicket is wrapped when a connection to a service needs a ticket the
// client does not hold (not yet obtained from the monitors, or expired).
// The monitor client should renew tickets and the caller try again.
var ErrNoTicket = errors.New("no valid ticket")

// ErrProtocol is wrapped when a peer's auth message cannot be understood.
var ErrProtocol = errors.New("auth protocol error")

// Error describes an authentication failure for one entity. It never holds
// key material.
type Error struct {
	Entity denc.AuthName // who we tried to authenticate as
	Peer   string        // the peer type, e.g. "mon" or "osd"
	Reason string        // what went wrong, in words
	Err    error         // ErrAuthFailed, ErrNoTicket or ErrProtocol, possibly wrapping more
}

func (e *Error) Error() string {
	return fmt.Sprintf("auth: %s to %s: %s: %v", e.Entity, e.Peer, e.Reason, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
