package rbd

import (
	"context"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/cls"
)

// This file is the narrow view of RADOS that the rest of the package
// works against: compound object operations, watch/notify, self-managed
// snapshots and pool lookups. radosio.go implements it over a
// rados.IOContext.

// opCode names one object operation.
type opCode int

const (
	opRead opCode = iota
	opStat
	opAssertExists
	opCall
	opCreate
	opWrite
	opWriteFull
	opTruncate
	opZero
	opDelete
	opRollback
)

// objOp is one operation of a compound request. After the request, out
// holds the operation's output.
type objOp struct {
	code   opCode
	off    uint64
	length uint64
	data   []byte
	method cls.Method
	excl   bool   // create: fail with EEXIST when the object exists
	snap   uint64 // rollback
	// into, for a read, is where the data should land: the
	// implementation may receive it there (out then aliases into) or
	// not (out is elsewhere).
	into []byte
	out  []byte
	// crc, when crcKnown, is crc32c.Checksum(data) (from a rados.Frozen)
	crc      uint32
	crcKnown bool
}

func readOp(off, length uint64) *objOp { return &objOp{code: opRead, off: off, length: length} }
func callOp(m cls.Method) *objOp       { return &objOp{code: opCall, method: m} }
func createOp(exclusive bool) *objOp   { return &objOp{code: opCreate, excl: exclusive} }
func writeOp(off uint64, p []byte) *objOp {
	return &objOp{code: opWrite, off: off, length: uint64(len(p)), data: p}
}
func writeFullOp(p []byte) *objOp      { return &objOp{code: opWriteFull, length: uint64(len(p)), data: p} }
func truncateOp(size uint64) *objOp    { return &objOp{code: opTruncate, off: size} }
func zeroOp(off, length uint64) *objOp { return &objOp{code: opZero, off: off, length: length} }
func deleteOp() *objOp                 { return &objOp{code: opDelete} }
func rollbackOp(snap uint64) *objOp    { return &objOp{code: opRollback, snap: snap} }
func statOp() *objOp                   { return &objOp{code: opStat} }

// readIntoOp reads len(p) bytes at off, into p where it can.
func readIntoOp(off uint64, p []byte) *objOp {
	return &objOp{code: opRead, off: off, length: uint64(len(p)), into: p}
}

// assertExistsOp fails a request with ENOENT when the object does not
// exist.
func assertExistsOp() *objOp { return &objOp{code: opAssertExists} }

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
	// read runs read operations on oid as of snapshot snap (cls.NoSnap:
	// the head). A missing object fails with ENOENT.
	read(ctx context.Context, oid string, snap uint64, ops ...*objOp) error
	// write runs write operations on oid atomically with snapshot
	// context snapc.
	write(ctx context.Context, oid string, snapc denc.SnapContext, ops ...*objOp) error
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
	// listWatchers lists the watches on oid.
	listWatchers(ctx context.Context, oid string) ([]watcherInfo, error)
	// blocklist keeps the client at addr away from the OSDs (before its
	// lock is broken, so that it cannot write any more).
	blocklist(ctx context.Context, addr denc.EntityAddr) error
}

// call runs one read-only class method.
func call(ctx context.Context, o objects, oid string, m cls.Method) ([]byte, error) {
	op := callOp(m)
	if err := o.read(ctx, oid, cls.NoSnap, op); err != nil {
		return nil, err
	}
	return op.out, nil
}

// callWrite runs one class method that changes the object.
func callWrite(ctx context.Context, o objects, oid string, m cls.Method) error {
	return o.write(ctx, oid, denc.SnapContext{}, callOp(m))
}
