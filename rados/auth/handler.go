package auth

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// Method is an authentication method (CEPH_AUTH_*), as sent in
// AUTH_REQUEST and listed in AUTH_BAD_METHOD.
type Method uint32

// Authentication methods.
const (
	MethodUnknown Method = 0
	MethodNone    Method = 1
	MethodCephX   Method = 2
)

// String returns Ceph's name for m.
func (m Method) String() string {
	switch m {
	case MethodUnknown:
		return "unknown"
	case MethodNone:
		return "none"
	case MethodCephX:
		return "cephx"
	}
	return fmt.Sprintf("method(%d)", uint32(m))
}

// Auth modes, the first byte of an AUTH_REQUEST payload to a monitor
// (AUTH_MODE_MON); authorizers to other services have no mode byte.
const authModeMon = 10

// Session is what a successful authentication yields for one connection.
type Session struct {
	// GlobalID is the client's global id as the peer knows it.
	GlobalID uint64
	// SessionKey keys the HMAC of the AUTH_SIGNATURE frames; empty with
	// auth none (the signature is then all zeros).
	SessionKey []byte
	// ConnectionSecret is the key material of secure mode (AES-GCM key
	// and nonces); empty in crc mode and with auth none.
	ConnectionSecret []byte
	// ServerChallenge is, for a cephx monitor connection, the challenge
	// the monitor gave it: a renewal of the AUTH ticket sent over this
	// connection must answer it (CephX.BuildRenewalRequest). Zero for
	// other connections and with auth none.
	ServerChallenge uint64
}

// Handler runs the auth exchange of one connection. The messenger calls
// Request once, More for each AUTH_REPLY_MORE, then Done for AUTH_DONE or
// BadMethod for AUTH_BAD_METHOD. A Handler is not reused across
// connections and is not safe for concurrent use.
type Handler interface {
	// Method is the method this handler speaks.
	Method() Method
	// Request returns the auth payload of AUTH_REQUEST.
	Request() ([]byte, error)
	// More handles the payload of AUTH_REPLY_MORE and returns the payload
	// of the AUTH_REQUEST_MORE to send back.
	More(reply []byte) ([]byte, error)
	// Done handles the payload of AUTH_DONE and the global id it carried.
	Done(globalID uint64, reply []byte) (Session, error)
	// BadMethod turns an AUTH_BAD_METHOD (the peer's errno result and the
	// methods it allows) into the error to report: an *Error carrying the
	// errno. For a refused key it wraps ErrAuthFailed; for a peer that
	// cannot authenticate anyone yet (EBUSY, EAGAIN), ErrTryAgain.
	BadMethod(result int32, allowed []Method) error
}

// Provider holds an identity's authentication state shared by all its
// connections and hands out a Handler per connection. CephX and None
// implement it; both are safe for concurrent use.
type Provider interface {
	// Name is the identity authenticated as.
	Name() denc.AuthName
	// NewHandler returns a handler for a new connection to a peer of the
	// given type: the full authentication for monitors, an authorizer for
	// OSDs, managers and MDSs.
	NewHandler(peer denc.EntityType) (Handler, error)
}

// errnoText names the errno values a monitor or OSD puts in
// AUTH_BAD_METHOD (Linux numbering, as Ceph sends it).
func errnoText(result int32) string {
	switch -result {
	case 1:
		return "operation not permitted (EPERM)"
	case 11:
		return "resource temporarily unavailable (EAGAIN)"
	case 13:
		return "permission denied (EACCES)"
	case 16:
		return "device busy (EBUSY)"
	case 22:
		return "invalid argument (EINVAL)"
	case 95:
		return "operation not supported (EOPNOTSUPP)"
	case 110:
		return "timed out (ETIMEDOUT)"
	case 0:
		return "no error"
	}
	return fmt.Sprintf("errno %d", -result)
}

// badMethodError is the common AUTH_BAD_METHOD interpretation.
func badMethodError(name denc.AuthName, peer denc.EntityType, used Method, result int32, allowed []Method) error {
	reason := fmt.Sprintf("%s refused", used)
	if used == MethodCephX && (result == -13 || result == -1) {
		reason = fmt.Sprintf("the %s refused our credentials (wrong key, or no such entity)", peer)
	}
	if result == -95 {
		ok := false
		for _, m := range allowed {
			ok = ok || m == used
		}
		if !ok {
			reason = fmt.Sprintf("method %s not allowed by the peer (it allows %v)", used, allowed)
		}
	}
	return Refused(name, peer.String(), reason, result)
}
