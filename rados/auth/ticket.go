package auth

import (
	"time"

	"github.com/purerbd/purerbd/rados/denc"
)

// ticket is what the client holds for one service: the session key shared
// with it, the opaque ticket blob to present, and its lifetime.
type ticket struct {
	sessionKey CryptoKey
	blob       CephXTicketBlob
	expires    time.Time
	renewAfter time.Time
}

// TicketInfo describes a held ticket, without its secrets.
type TicketInfo struct {
	Service    denc.EntityType
	SecretID   uint64    // id of the service's rotating secret that sealed it
	Expires    time.Time // the ticket is useless after this
	RenewAfter time.Time // renew from here on (the last quarter of its life)
}

// valid reports whether t can still be presented at now.
func (t *ticket) valid(now time.Time) bool { return t != nil && now.Before(t.expires) }

// needsRenewal reports whether t should be replaced at now.
func (t *ticket) needsRenewal(now time.Time) bool { return t == nil || !now.Before(t.renewAfter) }

// newTicket computes the lifetime of a ticket received at now.
func newTicket(now time.Time, key CryptoKey, blob CephXTicketBlob, validity denc.UTime) *ticket {
	v := time.Duration(validity.Sec)*time.Second + time.Duration(validity.Nsec)
	expires := now.Add(v)
	return &ticket{sessionKey: key, blob: blob, expires: expires, renewAfter: expires.Add(-v / 4)}
}
