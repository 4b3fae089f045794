// Package nbdtest helps test NBD servers and their users: it starts an
// nbd.Server on a Unix socket in a test's temporary directory, checks that
// the real NBD tools a test needs are installed, and offers a small,
// independent NBD client (handshake, pipelined requests, simple and
// structured replies, block status) plus raw message encoders for tests
// that must send malformed bytes.
//
// The client is written from the protocol description, not from the
// server's code, so that the two check each other.
package nbdtest
