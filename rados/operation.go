package rados

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/osdc"
)

// CmpXattrOp is a comparison for CmpXattr.
type CmpXattrOp uint8

// Comparisons: the attribute's value compared with the given one.
const (
	CmpXattrEQ  = CmpXattrOp(osdc.CmpXattrEQ)
	CmpXattrNE  = CmpXattrOp(osdc.CmpXattrNE)
	CmpXattrGT  = CmpXattrOp(osdc.CmpXattrGT)
	CmpXattrGTE = CmpXattrOp(osdc.CmpXattrGTE)
	CmpXattrLT  = CmpXattrOp(osdc.CmpXattrLT)
	CmpXattrLTE = CmpXattrOp(osdc.CmpXattrLTE)
)

// Step is the result of one operation of a ReadOp or WriteOp, filled in
// when the op has run: Err is the operation's own error, if any. An
// operation after a failed one did not run.
type Step struct {
	Err error
}

// setRVal records the operation's result and reports whether it
// succeeded.
func (s *Step) setRVal(rval int32) bool {
	if rval < 0 {
		s.Err = osdc.Errno(-rval)
		return false
	}
	return true
}

// stepper takes an operation's result (its rval and output) into the
// step that ReadOp's or WriteOp's method returned for it.
type stepper interface {
	take(o *osdc.OSDOp)
}

// inlineOps is how many operations an opList holds without allocating
// more: one, the common case of a single read or write of data, for
// which a larger ReadOp or WriteOp would cost more than it saves.
const inlineOps = 1

// opList is what ReadOp and WriteOp share: the operations and where each
// result goes.
type opList struct {
	ops     []osdc.OSDOp
	steps   []stepper // per op, nil when nothing to collect
	version uint64

	opsBuf   [inlineOps]osdc.OSDOp
	stepsBuf [inlineOps]stepper
}

func (l *opList) add(o osdc.OSDOp, s stepper) {
	if l.ops == nil {
		l.ops, l.steps = l.opsBuf[:0], l.stepsBuf[:0]
	}
	l.ops = append(l.ops, o)
	l.steps = append(l.steps, s)
}

// assertions shared by both kinds of operation
func (l *opList) assertExists() { l.add(osdc.AssertExists(), nil) }
func (l *opList) assertVersion(v uint64) {
	l.add(osdc.AssertVersion(v), nil)
}
func (l *opList) cmpXattr(name string, op CmpXattrOp, value []byte) {
	l.add(osdc.CmpXattr(name, uint8(op), osdc.CmpXattrModeString, value), nil)
}

// String describes the operations as Ceph's logs do:
// "[call rbd.copyup,write 0~4096]".
func (l *opList) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range l.ops {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.ops[i].String())
	}
	b.WriteByte(']')
	return b.String()
}

// run executes req, made of the operations, and distributes the
// results.
func (l *opList) run(ctx context.Context, io *IOContext, req *osdc.Request) error {
	if len(l.ops) == 0 {
		return fmt.Errorf("rados: empty operation: %w", ErrInvalid)
	}
	rep, err := io.doRequest(ctx, req)
	if rep != nil {
		l.version = rep.Version
		for i := range rep.Ops {
			if i < len(l.steps) && l.steps[i] != nil {
				l.steps[i].take(&rep.Ops[i])
			}
		}
	}
	return err
}

// WriteOp is a compound write: operations on one object that the OSD
// applies atomically and in order — all or none. Build it, then run it
// with IOContext.OperateWrite. The data given to its methods is sent as
// it is, not copied: it must not change until OperateWrite returns. A
// WriteOp is not safe for concurrent use.
type WriteOp struct {
	l        opList
	mtime    time.Time
	snapc    denc.SnapContext
	snapcSet bool
}

// NewWriteOp returns an empty compound write.
func NewWriteOp() *WriteOp { return &WriteOp{} }

// Create creates the object (exclusive: fail with ErrExists if it
// exists).
func (w *WriteOp) Create(exclusive bool) { w.l.add(osdc.Create(exclusive), nil) }

// Write writes data at off.
func (w *WriteOp) Write(data []byte, off uint64) { w.l.add(osdc.Write(off, data), nil) }

// WriteWithCRC is Write for data whose crc32c the caller already knows:
// crc must be crc32c.Checksum(data), as Frozen.Checksum returns it. In
// crc mode the messenger sends it instead of computing it over every
// byte. A wrong crc makes the OSD drop the connection each time the
// write is sent, until ctx ends.
func (w *WriteOp) WriteWithCRC(data []byte, off uint64, crc uint32) {
	w.l.add(withCRC(osdc.Write(off, data), crc), nil)
}

// WriteFull replaces the object's data.
func (w *WriteOp) WriteFull(data []byte) { w.l.add(osdc.WriteFull(data), nil) }

// WriteFullWithCRC is WriteFull for data whose crc32c the caller already
// knows (see WriteWithCRC).
func (w *WriteOp) WriteFullWithCRC(data []byte, crc uint32) {
	w.l.add(withCRC(osdc.WriteFull(data), crc), nil)
}

// withCRC marks o's data crc as known.
func withCRC(o osdc.OSDOp, crc uint32) osdc.OSDOp {
	o.InDataCRC, o.InDataCRCKnown = crc, true
	return o
}

// Append appends data.
func (w *WriteOp) Append(data []byte) { w.l.add(osdc.Append(data), nil) }

// Truncate sets the object's size.
func (w *WriteOp) Truncate(size uint64) { w.l.add(osdc.Truncate(size), nil) }

// Zero zeroes a range.
func (w *WriteOp) Zero(off, length uint64) { w.l.add(osdc.Zero(off, length), nil) }

// Remove deletes the object.
func (w *WriteOp) Remove() { w.l.add(osdc.Delete(), nil) }

// Rollback restores the object's data, attributes and omap to what they
// were at snapshot snapID: a self-managed snapshot, or a pool snapshot's
// id from LookupSnap (librados' selfmanaged_snap_rollback and
// snap_rollback).
func (w *WriteOp) Rollback(snapID uint64) { w.l.add(osdc.Rollback(snapID), nil) }

// SetXattr sets an extended attribute.
func (w *WriteOp) SetXattr(name string, value []byte) { w.l.add(osdc.SetXattr(name, value), nil) }

// RmXattr removes an extended attribute.
func (w *WriteOp) RmXattr(name string) { w.l.add(osdc.RmXattr(name), nil) }

// SetOmap sets omap entries.
func (w *WriteOp) SetOmap(kv map[string][]byte) { w.l.add(osdc.OmapSetVals(kv), nil) }

// RmOmapKeys removes omap entries.
func (w *WriteOp) RmOmapKeys(keys []string) { w.l.add(osdc.OmapRmKeys(keys), nil) }

// CleanOmap removes every omap entry.
func (w *WriteOp) CleanOmap() { w.l.add(osdc.OmapClear(), nil) }

// SetOmapHeader sets the omap header.
func (w *WriteOp) SetOmapHeader(h []byte) { w.l.add(osdc.OmapSetHeader(h), nil) }

// SetAllocationHint tells the OSD the object's expected size and write
// size.
func (w *WriteOp) SetAllocationHint(objectSize, writeSize uint64, flags uint32) {
	w.l.add(osdc.SetAllocHint(objectSize, writeSize, flags), nil)
}

// AssertExists makes the write fail with ErrNotFound unless the object
// exists.
func (w *WriteOp) AssertExists() { w.l.assertExists() }

// AssertVersion makes the write fail unless the object's version is v
// (ErrRange: older, ErrOverflow: newer).
func (w *WriteOp) AssertVersion(v uint64) { w.l.assertVersion(v) }

// CmpXattr makes the write fail with ErrCanceled unless the attribute
// compares as op with value (as strings).
func (w *WriteOp) CmpXattr(name string, op CmpXattrOp, value []byte) { w.l.cmpXattr(name, op, value) }

// Exec calls a class method that may write; its output is in the step.
func (w *WriteOp) Exec(class, method string, in []byte) *ExecStep {
	s := &ExecStep{}
	w.l.add(osdc.Call(class, method, in), s)
	return s
}

// SetMTime sets the modification time the write records (default: now).
func (w *WriteOp) SetMTime(t time.Time) { w.mtime = t }

// SetSnapContext makes this write carry the self-managed snapshot
// context seq and snaps (newest first) in place of the IOContext's
// (librados' operate with a snap_seq and snaps), so that writers with
// different contexts share one IOContext. snaps is not copied: it must
// not change until OperateWrite returns.
func (w *WriteOp) SetSnapContext(seq uint64, snaps []uint64) {
	w.snapc, w.snapcSet = denc.SnapContext{Seq: seq, Snaps: snaps}, true
}

// Version returns the object's version after the write ran.
func (w *WriteOp) Version() uint64 { return w.l.version }

// String describes the operations as Ceph's logs do:
// "[create,call rbd.set_id]".
func (w *WriteOp) String() string { return w.l.String() }

// OperateWrite runs a compound write on oid. Config.OpTimeout bounds it
// when ctx has no deadline.
func (io *IOContext) OperateWrite(ctx context.Context, oid string, w *WriteOp) error {
	req := io.request(oid, osdc.FlagWrite, w.l.ops)
	req.MTime = w.mtime
	if w.snapcSet {
		req.SnapContext = w.snapc
	}
	return w.l.run(ctx, io, &req)
}

// ReadOp is a compound read: operations on one object that the OSD runs
// in order. Each method returns a step that holds its result once the
// op has run with IOContext.OperateRead. A ReadOp is not safe for
// concurrent use.
type ReadOp struct {
	l       opList
	snap    uint64
	snapSet bool
	// read is the first Read or ReadInto step, kept in the ReadOp so
	// that a lone read allocates one object rather than two
	read     ReadStep
	readUsed bool
}

// readStep returns a step for a Read or ReadInto.
func (r *ReadOp) readStep() *ReadStep {
	if r.readUsed {
		return &ReadStep{}
	}
	r.readUsed = true
	return &r.read
}

// NewReadOp returns an empty compound read.
func NewReadOp() *ReadOp { return &ReadOp{} }

// ReadStep holds the bytes a read returned.
type ReadStep struct {
	Step
	Data []byte
	// into is ReadInto's buffer, which Data is a prefix of.
	into    []byte
	intoSet bool
}

func (s *ReadStep) take(o *osdc.OSDOp) {
	if !s.setRVal(o.RVal) {
		return
	}
	if !s.intoSet {
		s.Data = o.OutData
		return
	}
	n := min(len(o.OutData), len(s.into))
	if n > 0 && &o.OutData[0] != &s.into[0] {
		copy(s.into, o.OutData[:n])
	}
	s.Data = s.into[:n]
}

// StatStep holds an object's size and modification time.
type StatStep struct {
	Step
	Size    uint64
	ModTime time.Time
}

func (s *StatStep) take(o *osdc.OSDOp) {
	if !s.setRVal(o.RVal) {
		return
	}
	size, mtime, err := osdc.ParseStat(o.OutData)
	s.Size, s.ModTime, s.Err = size, mtime.Time(), err
}

// XattrsStep holds extended attributes.
type XattrsStep struct {
	Step
	Xattrs map[string][]byte
}

func (s *XattrsStep) take(o *osdc.OSDOp) {
	if s.setRVal(o.RVal) {
		s.Xattrs, s.Err = osdc.ParseXattrs(o.OutData)
	}
}

// OmapStep holds omap entries (in key order) and whether more follow.
type OmapStep struct {
	Step
	Entries []KeyValue
	More    bool
	byKeys  bool // the reply's "more" means nothing
}

func (s *OmapStep) take(o *osdc.OSDOp) {
	if !s.setRVal(o.RVal) {
		return
	}
	s.Entries, s.More, s.Err = osdc.ParseOmapVals(o.OutData)
	if s.byKeys {
		s.More = false
	}
}

// OmapKeysStep holds omap keys and whether more follow.
type OmapKeysStep struct {
	Step
	Keys []string
	More bool
}

func (s *OmapKeysStep) take(o *osdc.OSDOp) {
	if s.setRVal(o.RVal) {
		s.Keys, s.More, s.Err = osdc.ParseOmapKeys(o.OutData)
	}
}

// ExecStep holds a class method's output.
type ExecStep struct {
	Step
	Output []byte
}

func (s *ExecStep) take(o *osdc.OSDOp) {
	if s.setRVal(o.RVal) {
		s.Output = o.OutData
	}
}

// Read reads length bytes at off (0: to the end). The step's Data is
// the reply's own buffer.
func (r *ReadOp) Read(off, length uint64) *ReadStep {
	s := r.readStep()
	r.l.add(osdc.Read(off, length), s)
	return s
}

// ReadInto reads up to len(p) bytes at off into p; the step's Data is
// p[:n], n being fewer than len(p) at the end of the object and 0 beyond
// it. When it is the ReadOp's only operation, the bytes are received
// straight into p where the OSD session allows (crc mode), with neither
// an allocation nor a copy; otherwise they are copied from the reply. p
// must not be touched until OperateRead returns, and holds nothing
// defined after an error.
func (r *ReadOp) ReadInto(p []byte, off uint64) *ReadStep {
	s := r.readStep()
	s.into, s.intoSet = p, true
	if len(p) == 0 {
		// a read of length 0 reads to the end: ask only whether the
		// object exists, which fails as the read would
		r.l.add(osdc.AssertExists(), s)
		return s
	}
	r.l.add(osdc.Read(off, uint64(len(p))), s)
	return s
}

// Stat returns the object's size and modification time.
func (r *ReadOp) Stat() *StatStep {
	s := &StatStep{}
	r.l.add(osdc.Stat(), s)
	return s
}

// GetXattr reads one extended attribute.
func (r *ReadOp) GetXattr(name string) *ReadStep {
	s := &ReadStep{}
	r.l.add(osdc.GetXattr(name), s)
	return s
}

// ListXattrs reads every extended attribute.
func (r *ReadOp) ListXattrs() *XattrsStep {
	s := &XattrsStep{}
	r.l.add(osdc.GetXattrs(), s)
	return s
}

// GetOmapValues reads up to max omap entries after startAfter whose keys
// start with prefix.
func (r *ReadOp) GetOmapValues(startAfter, prefix string, max int) *OmapStep {
	s := &OmapStep{}
	r.l.add(osdc.OmapGetVals(startAfter, prefix, uint64(max)), s)
	return s
}

// GetOmapValuesByKeys reads the omap entries with the given keys.
func (r *ReadOp) GetOmapValuesByKeys(keys []string) *OmapStep {
	s := &OmapStep{byKeys: true}
	r.l.add(osdc.OmapGetValsByKeys(keys), s)
	return s
}

// GetOmapKeys reads up to max omap keys after startAfter.
func (r *ReadOp) GetOmapKeys(startAfter string, max int) *OmapKeysStep {
	s := &OmapKeysStep{}
	r.l.add(osdc.OmapGetKeys(startAfter, uint64(max)), s)
	return s
}

// GetOmapHeader reads the omap header.
func (r *ReadOp) GetOmapHeader() *ReadStep {
	s := &ReadStep{}
	r.l.add(osdc.OmapGetHeader(), s)
	return s
}

// Exec calls a read-only class method.
func (r *ReadOp) Exec(class, method string, in []byte) *ExecStep {
	s := &ExecStep{}
	r.l.add(osdc.Call(class, method, in), s)
	return s
}

// AssertExists makes the read fail with ErrNotFound unless the object
// exists.
func (r *ReadOp) AssertExists() { r.l.assertExists() }

// AssertVersion makes the read fail unless the object's version is v.
func (r *ReadOp) AssertVersion(v uint64) { r.l.assertVersion(v) }

// CmpXattr makes the read fail with ErrCanceled unless the attribute
// compares as op with value.
func (r *ReadOp) CmpXattr(name string, op CmpXattrOp, value []byte) { r.l.cmpXattr(name, op, value) }

// SetSnap makes this read read the object as it was at snapshot snapID
// in place of the IOContext's read snapshot (librados' operate with a
// snapid), so that readers of different snapshots share one IOContext;
// 0 reads the live object.
func (r *ReadOp) SetSnap(snapID uint64) { r.snap, r.snapSet = snapID, true }

// Version returns the object's version, after the read ran.
func (r *ReadOp) Version() uint64 { return r.l.version }

// String describes the operations as Ceph's logs do:
// "[stat,read 0~4096]".
func (r *ReadOp) String() string { return r.l.String() }

// OperateRead runs a compound read on oid. When an operation fails, the
// error is returned and the steps up to it hold their results.
// Config.OpTimeout bounds it when ctx has no deadline.
func (io *IOContext) OperateRead(ctx context.Context, oid string, r *ReadOp) error {
	req := io.request(oid, io.dataReadFlags(r.l.ops), r.l.ops)
	if r.snapSet {
		req.SnapID = r.snap
	}
	if len(r.l.ops) == 1 {
		if s, ok := r.l.steps[0].(*ReadStep); ok && len(s.into) > 0 {
			// the reply's data segment is the read's bytes alone
			req.OutBuf = s.into
		}
	}
	return r.l.run(ctx, io, &req)
}
