// Package genl is a small generic netlink client: it encodes and decodes
// netlink messages and attributes, resolves generic netlink families
// through the controller, and runs request/acknowledgement exchanges with
// the kernel over a NETLINK_GENERIC socket, honouring contexts.
//
// It knows no family but the controller; package kernel speaks the nbd
// family on top of it. Every decoder here takes bytes from the kernel and
// is fuzzed: malformed input is an error, never a panic.
package genl
