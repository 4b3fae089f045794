// Package msgr is a client for Ceph's messenger protocol v2.1 (msgr2.1):
// it dials a monitor, OSD or manager, authenticates through an
// auth.Provider, negotiates crc or secure (AES-128-GCM) mode, identifies
// both ends and then exchanges Ceph messages over one TCP connection.
//
// Dial performs the whole handshake synchronously:
//
//	banner  -> HELLO -> AUTH_REQUEST ... AUTH_DONE -> AUTH_SIGNATURE
//	        -> CLIENT_IDENT / SERVER_IDENT
//
// and returns a Conn that is ready for Send. Afterwards one reader and one
// writer goroutine serve the connection. Send waits until its message is
// written; Post queues one and returns, and Settle later takes its buffers
// back (withdrawing it if it is still queued), so that a caller waiting for
// a reply anyway does not also wait for the writer. Messages go out in the
// order they were sent or posted. Received messages arrive, fully read and
// verified and in order, on Conn.Incoming, or are handed to
// Config.Intercept on the reader when the owner takes them there. The
// connection follows Ceph's lossy client policy: it is never re-established
// underneath the owner.
// When it fails (peer closed, bad frame, liveness timeout, Close), Done is
// closed and Incoming is closed after the messages received before the
// fault, exactly once; Err tells why. The owner (the monitor client, the
// objecter) then dials a new Conn and resends what it needs to. So nothing
// sent is kept for resending, and the peer's ACK frames, which would
// release such messages, are checked and ignored (as Ceph's lossy
// connections do); the peer is identified by its SERVER_IDENT, which must
// include the address dialed, nonce included.
//
// The wire format, in short: after a 26-byte banner exchange every unit is
// a frame: a 32-byte preamble (tag, up to four segment lengths, crc32c),
// the control segment, and for MESSAGE frames the front, middle and data
// segments with an epilogue. In crc mode each part carries a crc32c; in
// secure mode the preamble with the first 48 control bytes, the rest of
// the control segment and the tail are each sealed with AES-128-GCM, whose
// key and nonces come from the connection secret cephx established.
package msgr
