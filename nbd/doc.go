// Package nbd is a Network Block Device protocol server: the fixed newstyle
// handshake (with optional TLS) and the transmission phase, serving exports
// whose data lives in a Backend.
//
// A Server answers any connection: a listener (Serve), one already-accepted
// connection that starts with the handshake (ServeConn), or a socket that is
// already in the transmission phase (ServeTransmission), which is what the
// Linux kernel hands over after userspace did the handshake for it.
//
// Requests on one connection run concurrently (bounded by a count and a byte
// budget) and are answered out of order by a single writer. A Memory
// export, which never blocks, is served inline instead: the goroutine that
// reads the requests serves them and buffers the replies until it would
// wait for the client. Structured
// replies, sparse reads, the base:allocation metadata context, a
// backend's dirty bitmaps as qemu:dirty-bitmap: contexts (DirtyBitmapper)
// and block status are offered to clients that negotiate them; the
// kernel gets simple replies only.
//
// NBD has no authentication of its own. A Server bounds what any client
// can make it hold: its connections (Config.MaxConns), the time to finish
// the handshake (HandshakeTimeout), and per connection the requests in
// flight and the READ data owed to a client that does not read its replies
// (MaxInFlight, MaxInFlightBytes, MaxReplyBytes). Clients are told apart
// only by TLS client certificates (Config.TLSConfig with ClientAuth and
// RequireTLS); ListenTCP listens on loopback unless told otherwise, and
// LoopbackOnly tells a caller whether an address is reachable from other
// hosts.
//
// The package knows nothing about Ceph: an RBD image is one Backend among
// others. Memory and File are the two backends shipped here; package
// nbd/rbdnbd serves an RBD image. Neither this package nor package rbd
// imports the other.
//
// Everything follows the NBD protocol description (doc/proto.md in the
// NetworkBlockDevice/nbd repository); comments quote its constant names.
package nbd
