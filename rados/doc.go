// Package rados is purerbd's public client for Ceph's object store,
// written in Go without cgo: connect to a cluster, pick a pool (and a
// namespace) and read, write and inspect objects — data, extended
// attributes, omap key/value pairs, object class methods, watch/notify
// and listing — or run monitor commands.
//
// It is modelled on librados and go-ceph's rados package, adapted to Go:
// every call takes a context.Context (deadlines and cancellation per
// operation), errors are values matched with errors.Is (ErrNotFound,
// ErrExists, ...), listing is an iterator, and a Conn and its IOContexts
// are safe for concurrent use.
//
//	conn, err := rados.ConnectFromConf(ctx, cephconf.Args{Conf: "/etc/ceph/ceph.conf"})
//	if err != nil { ... }
//	defer conn.Close()
//	io, err := conn.IOContext(ctx, "rbd", "")
//	if err != nil { ... }
//	err = io.WriteFull(ctx, "greeting", []byte("hello"))
//	data, err := io.ReadAll(ctx, "greeting")
//
// Several operations on one object can be combined into a WriteOp or a
// ReadOp, which the OSD executes atomically and in order.
//
// Underneath, a Conn is a monitor client (rados/monc: authentication,
// maps, commands) and an objecter (rados/osdc: one session per OSD,
// requests resent across map changes and OSD restarts, watches kept
// registered).
package rados
