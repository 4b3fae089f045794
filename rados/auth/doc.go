// Package auth implements client-side Ceph authentication: parsing keys
// and keyrings, the cephx protocol (challenge and proof, tickets, session
// keys, service tickets, authorizers, ticket renewal, global_id reclaim)
// and auth none.
//
// The package opens no sockets. A Provider (CephX or None) holds the
// long-lived state of one client identity and is shared by all its
// connections; for each connection the messenger asks it for a Handler and
// drives that through the msgr2 auth frames:
//
//	AUTH_REQUEST        <- Handler.Request
//	AUTH_REPLY_MORE     -> Handler.More    -> AUTH_REQUEST_MORE
//	AUTH_DONE           -> Handler.Done    -> Session (session key, connection secret)
//	AUTH_BAD_METHOD     -> Handler.BadMethod
//
// A connection to a monitor authenticates the client itself (cephx proves
// knowledge of the key and obtains the AUTH ticket and service tickets); a
// connection to an OSD or a manager presents an authorizer built from the
// service ticket obtained earlier from the monitors. Tickets expire: the
// monitor client renews them through CephX.NeedRenewal,
// CephX.BuildRenewalRequest and CephX.HandleRenewalReply carried in MAuth
// messages; a renewal of the AUTH ticket answers the challenge of the
// session it is sent on (Session.ServerChallenge of that connection).
//
// A refusal by a peer is an *Error carrying its errno: EBUSY and EAGAIN
// wrap ErrTryAgain (try later or elsewhere), others ErrAuthFailed (final).
//
// Key material never appears in errors or logs: CryptoKey formats itself
// redacted.
package auth
