package rbd

import (
	"context"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// This file is the narrow view of RADOS that the rest of the package
// works against: compound object operations (rados.ReadOp and
// rados.WriteOp), watch/notify, self-managed snapshots and pool lookups.
// radosio.go implements it over a rados.IOContext.

// notifyEvent is a notification delivered to a watch.
type notifyEvent struct {
	NotifyID    uint64
	Cookie      uint64 // the watch's handle
	NotifierGID uint64
	Payload     []byte
}

// notifyReply is one watcher's acknowledgement of a notify.
type notifyReply struct {
	GID    uint64
	Cookie uint64
	Reply  []byte
}

// watcherInfo is one watch on an object.
type watcherInfo struct {
	Entity denc.EntityName
	Cookie uint64
	Addr   denc.EntityAddr
}

// watchHandle is an established watch.
type watchHandle interface {
	// Handle is the watch's cookie (librbd's "watch handle").
	Handle() uint64
	// Close removes the watch.
	Close(ctx context.Context) error
}

// watchCallbacks receive a watch's events. notify returns the payload to
// acknowledge the notification with (nil for none). watchErr reports that
// the watch was lost; the implementation re-establishes it and then calls
// rewatched with the new handle.
type watchCallbacks struct {
	notify    func(ev notifyEvent) []byte
	watchErr  func(err error)
	rewatched func(newHandle uint64)
}

// objects is what package rbd needs from RADOS, for one pool and
// namespace.
type objects interface {
	// read runs the compound read op on oid as of snapshot snap
	// (cls.NoSnap: the head). A missing object fails with ENOENT.
	read(ctx context.Context, oid string, snap uint64, op *rados.ReadOp) error
	// write runs the compound write op on oid, atomically, with
	// snapshot context snapc.
	write(ctx context.Context, oid string, snapc denc.SnapContext, op *rados.WriteOp) error
	// watch watches oid.
	watch(ctx context.Context, oid string, cb watchCallbacks) (watchHandle, error)
	// notify notifies oid's watchers and waits for their
	// acknowledgements or timeout.
	notify(ctx context.Context, oid string, payload []byte, timeout time.Duration) ([]notifyReply, error)
	// allocSnap allocates a self-managed snapshot id in the pool.
	allocSnap(ctx context.Context) (uint64, error)
	// releaseSnap releases a self-managed snapshot id.
	releaseSnap(ctx context.Context, snap uint64) error
	// poolID is the pool's id; namespace the I/O context's namespace.
	poolID() int64
	namespace() string
	// instanceID is the client's global id (the "client.<gid>" entity).
	instanceID() uint64
	// pool returns the objects of another pool (and namespace) of the
	// same cluster; poolByName looks a pool id up by name.
	pool(ctx context.Context, id int64, ns string) (objects, error)
	poolByName(ctx context.Context, name string) (int64, error)
	// poolIDs lists the cluster's pools that are not cache tiers, by
	// id.
	poolIDs(ctx context.Context) ([]int64, error)
	// listWatchers lists the watches on oid.
	listWatchers(ctx context.Context, oid string) ([]watcherInfo, error)
	// blocklist keeps the client at addr away from the OSDs (before its
	// lock is broken, so that it cannot write any more).
	blocklist(ctx context.Context, addr denc.EntityAddr) error
}

// readCall adds a call of read-only class method m to r.
func readCall(r *rados.ReadOp, m cls.Method) *rados.ExecStep {
	return r.Exec(m.Class, m.Name, m.In)
}

// writeCalls adds calls of class methods to w, in order.
func writeCalls(w *rados.WriteOp, ms ...cls.Method) {
	for _, m := range ms {
		w.Exec(m.Class, m.Name, m.In)
	}
}

// newWrite returns a compound write that starts with calls of class
// methods (guards such as the exclusive lock's assertion, say).
func newWrite(ms ...cls.Method) *rados.WriteOp {
	w := rados.NewWriteOp()
	writeCalls(w, ms...)
	return w
}

// createWith returns a compound write that creates the object, failing
// with EEXIST when it exists, and calls class method m on it.
func createWith(m cls.Method) *rados.WriteOp {
	w := rados.NewWriteOp()
	w.Create(true)
	writeCalls(w, m)
	return w
}

// call runs one read-only class method.
func call(ctx context.Context, o objects, oid string, m cls.Method) ([]byte, error) {
	r := rados.NewReadOp()
	s := readCall(r, m)
	if err := o.read(ctx, oid, cls.NoSnap, r); err != nil {
		return nil, err
	}
	return s.Output, nil
}

// callWrite runs one class method that changes the object.
func callWrite(ctx context.Context, o objects, oid string, m cls.Method) error {
	return o.write(ctx, oid, denc.SnapContext{}, newWrite(m))
}

// deleteObject deletes oid, writing with snapshot context snapc.
func deleteObject(ctx context.Context, o objects, oid string, snapc denc.SnapContext) error {
	w := rados.NewWriteOp()
	w.Remove()
	return o.write(ctx, oid, snapc, w)
}
