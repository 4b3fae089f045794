package msgr

import "errors"

// Errors that tell apart why a connection failed. A Conn's error (Err,
// and the error from Dial) wraps one of these, an auth error
// (auth.ErrAuthFailed, auth.ErrNoTicket), a context error, or an I/O
// error.
var (
	// ErrClosed means Close was called.
	ErrClosed = errors.New("msgr: connection closed")
	// ErrProtocol means the peer sent something this client cannot
	// accept: a malformed frame, a bad checksum or authentication tag,
	// a frame out of place, a wrong peer type or address.
	ErrProtocol = errors.New("msgr: protocol error")
	// ErrPeerClosed means the peer closed or reset the TCP connection.
	ErrPeerClosed = errors.New("msgr: peer closed the connection")
	// ErrTimeout means the peer stopped answering keepalives.
	ErrTimeout = errors.New("msgr: peer did not answer within the liveness timeout")
	// ErrMissingFeatures means the peer requires features this client
	// does not advertise, or lacks ones it requires.
	ErrMissingFeatures = errors.New("msgr: feature mismatch")
	// ErrModeRefused means the peer allows none of the connection modes
	// offered (for example a cluster that requires secure mode and a
	// client configured for crc only).
	ErrModeRefused = errors.New("msgr: connection mode refused by peer")
	// ErrWait means the peer asked us to wait for a connection it is
	// opening to us (a race lossy clients should not meet); retry later.
	ErrWait = errors.New("msgr: peer asked to wait (connection race)")
	// ErrWrongPeer means the peer's SERVER_IDENT does not include the
	// address dialed, nonce included: another daemon, or another
	// instance of it (restarted, with a new nonce), listens there. A
	// newer map tells where the daemon meant is.
	ErrWrongPeer = errors.New("msgr: the peer is not the daemon instance dialed")
	// ErrReset means the peer reset the session.
	ErrReset = errors.New("msgr: session reset by peer")
)
