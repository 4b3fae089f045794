package rados

import (
	"context"
	"fmt"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/osdc"
)

// AllNamespaces, as an IOContext's namespace, makes listing return the
// objects of every namespace.
const AllNamespaces = osdc.AllNamespaces

// IOContext addresses the objects of one pool and namespace. It is
// immutable (the With methods return modified copies) and safe for
// concurrent use.
type IOContext struct {
	conn     *Conn
	pool     int64
	poolName string
	ns       string
	key      string // locator key
	readSnap uint64 // 0: the live objects
	snapc    denc.SnapContext
	// readFlags are added to data reads (FlagLocalizeReads)
	readFlags uint32
	// extraFlags are added to every request (FlagFullTry)
	extraFlags uint32
}

// Pool returns the pool's id.
func (io *IOContext) Pool() int64 { return io.pool }

// PoolName returns the pool's name.
func (io *IOContext) PoolName() string { return io.poolName }

// Namespace returns the namespace.
func (io *IOContext) Namespace() string { return io.ns }

// Conn returns the connection the context belongs to.
func (io *IOContext) Conn() *Conn { return io.conn }

// WithNamespace returns a copy for namespace ns.
func (io *IOContext) WithNamespace(ns string) *IOContext {
	c := *io
	c.ns = ns
	return &c
}

// WithLocatorKey returns a copy that places objects by key instead of
// by their names (librados' locator key).
func (io *IOContext) WithLocatorKey(key string) *IOContext {
	c := *io
	c.key = key
	return &c
}

// WithReadSnap returns a copy that reads objects as they were at
// snapshot snapID (a pool snapshot, see LookupSnap, or a self-managed
// one); 0 reads the live objects. Writes through it fail.
func (io *IOContext) WithReadSnap(snapID uint64) *IOContext {
	c := *io
	c.readSnap = snapID
	return &c
}

// WithSnapContext returns a copy whose writes carry the self-managed
// snapshot context seq and snaps (newest first), as RBD images do.
func (io *IOContext) WithSnapContext(seq uint64, snaps []uint64) *IOContext {
	c := *io
	c.snapc = denc.SnapContext{Seq: seq, Snaps: append([]uint64(nil), snaps...)}
	return &c
}

// WithLocalizedReads returns a copy whose data reads (Read, ReadAll,
// OperateRead without class calls) go to the acting OSD nearest to the
// Conn's Config.CrushLocation rather than the primary, as librbd's
// rbd_read_from_replica_policy=localize: a replica that cannot serve
// one (writes to the object in flight) sends it back to the primary.
// Without a CrushLocation reads stay with the primary.
func (io *IOContext) WithLocalizedReads() *IOContext {
	c := *io
	c.readFlags |= osdc.FlagLocalizeReads
	return &c
}

// WithFullTry returns a copy whose requests go to the OSDs even while
// the pool or the cluster is full, instead of waiting for space
// (librados' set_pool_full_try): removals, which free space, then run,
// and writes fail with ErrNoSpace rather than block.
func (io *IOContext) WithFullTry() *IOContext {
	c := *io
	c.extraFlags |= osdc.FlagFullTry
	return &c
}

// dataReadFlags are the flags of a read of ops: FlagRead, with the
// copy's readFlags unless an op is a class call (those stay with the
// primary, as librbd's header reads do).
func (io *IOContext) dataReadFlags(ops []osdc.OSDOp) uint32 {
	for _, op := range ops {
		if op.Code == osdc.OpCall {
			return osdc.FlagRead
		}
	}
	return osdc.FlagRead | io.readFlags
}

// request builds an objecter request on oid.
func (io *IOContext) request(oid string, flags uint32, ops []osdc.OSDOp) osdc.Request {
	r := osdc.Request{
		Pool: io.pool, Namespace: io.ns, Key: io.key, OID: oid, Ops: ops, Flags: flags | io.extraFlags,
		SnapContext: io.snapc,
	}
	if flags&osdc.FlagWrite == 0 {
		r.SnapID = io.readSnap
	}
	return r
}

// do runs ops on oid. flags 0 lets the objecter derive read/write.
func (io *IOContext) do(ctx context.Context, oid string, flags uint32, ops ...osdc.OSDOp) (*osdc.Reply, error) {
	req := io.request(oid, flags, ops)
	return io.doRequest(ctx, &req)
}

// doRequest runs a request built by request, bounded by the Conn's
// operation timeout when ctx has no deadline.
func (io *IOContext) doRequest(ctx context.Context, req *osdc.Request) (*osdc.Reply, error) {
	if req.OID == "" {
		return nil, fmt.Errorf("rados: empty object name: %w", ErrInvalid)
	}
	ctx, cancel := io.conn.opContext(ctx)
	defer cancel()
	return io.conn.ob.Do(ctx, req)
}

// Read reads up to len(p) bytes at off into p and returns how many it
// read: fewer at the end of the object, 0 beyond it. The bytes are
// received straight into p where the OSD session allows (crc mode),
// else copied from the reply; ReadAll and ReadOp.Read hand out the
// reply's own buffer instead.
func (io *IOContext) Read(ctx context.Context, oid string, p []byte, off uint64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	ops := []osdc.OSDOp{osdc.Read(off, uint64(len(p)))}
	req := io.request(oid, io.dataReadFlags(ops), ops)
	req.OutBuf = p
	rep, err := io.doRequest(ctx, &req)
	if err != nil {
		return 0, err
	}
	out := rep.Ops[0].OutData
	out = out[:min(len(out), len(p))]
	if len(out) > 0 && &out[0] != &p[0] {
		copy(p, out)
	}
	return len(out), nil
}

// ReadAll reads a whole object.
func (io *IOContext) ReadAll(ctx context.Context, oid string) ([]byte, error) {
	rep, err := io.do(ctx, oid, io.dataReadFlags(nil), osdc.Read(0, 0))
	if err != nil {
		return nil, err
	}
	return rep.Ops[0].OutData, nil
}

// Write writes data at off, creating the object if needed.
func (io *IOContext) Write(ctx context.Context, oid string, data []byte, off uint64) error {
	_, err := io.do(ctx, oid, 0, osdc.Write(off, data))
	return err
}

// WriteFull replaces the object's data with data (creating it).
func (io *IOContext) WriteFull(ctx context.Context, oid string, data []byte) error {
	_, err := io.do(ctx, oid, 0, osdc.WriteFull(data))
	return err
}

// Append appends data to the object (creating it).
func (io *IOContext) Append(ctx context.Context, oid string, data []byte) error {
	_, err := io.do(ctx, oid, 0, osdc.Append(data))
	return err
}

// Truncate sets the object's size (creating it).
func (io *IOContext) Truncate(ctx context.Context, oid string, size uint64) error {
	_, err := io.do(ctx, oid, 0, osdc.Truncate(size))
	return err
}

// Zero zeroes length bytes at off.
func (io *IOContext) Zero(ctx context.Context, oid string, off, length uint64) error {
	_, err := io.do(ctx, oid, 0, osdc.Zero(off, length))
	return err
}

// Remove deletes the object (ErrNotFound if it does not exist).
func (io *IOContext) Remove(ctx context.Context, oid string) error {
	_, err := io.do(ctx, oid, 0, osdc.Delete())
	return err
}

// Create creates an empty object; with exclusive it fails with
// ErrExists when the object exists.
func (io *IOContext) Create(ctx context.Context, oid string, exclusive bool) error {
	_, err := io.do(ctx, oid, 0, osdc.Create(exclusive))
	return err
}

// ObjectStat is an object's size and modification time.
type ObjectStat struct {
	Size    uint64
	ModTime time.Time
}

// Stat returns the object's size and modification time.
func (io *IOContext) Stat(ctx context.Context, oid string) (ObjectStat, error) {
	rep, err := io.do(ctx, oid, 0, osdc.Stat())
	if err != nil {
		return ObjectStat{}, err
	}
	size, mtime, err := osdc.ParseStat(rep.Ops[0].OutData)
	if err != nil {
		return ObjectStat{}, err
	}
	return ObjectStat{Size: size, ModTime: mtime.Time()}, nil
}

// Exec calls method of object class class on the object with input in
// and returns the method's output (librados' exec: sent as a read; the
// OSD knows which methods write).
func (io *IOContext) Exec(ctx context.Context, oid, class, method string, in []byte) ([]byte, error) {
	if len(class) > 255 || len(method) > 255 {
		return nil, fmt.Errorf("rados: class or method name longer than 255 bytes: %w", ErrInvalid)
	}
	rep, err := io.do(ctx, oid, osdc.FlagRead, osdc.Call(class, method, in))
	if err != nil {
		return nil, err
	}
	return rep.Ops[0].OutData, nil
}

// Location is where an object lives: its placement group and OSDs.
type Location = osdc.Location

// Locate computes where an object lives under the current OSD map, as
// `ceph osd map` reports it.
func (io *IOContext) Locate(oid string) (Location, error) {
	key := io.key
	if key == oid {
		key = ""
	}
	return io.conn.ob.Locate(io.pool, io.ns, key, oid)
}
