package rados

import (
	"context"
	"fmt"
	"time"

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

func (s *Step) setRVal(rval int32) {
	if rval < 0 {
		s.Err = osdc.Errno(-rval)
	}
}

// opList is what ReadOp and WriteOp share: the operations and what to do
// with each result.
type opList struct {
	ops     []osdc.OSDOp
	results []func(o *osdc.OSDOp) // per op, nil when nothing to collect
	version uint64
}

func (l *opList) add(o osdc.OSDOp, result func(o *osdc.OSDOp)) {
	l.ops = append(l.ops, o)
	l.results = append(l.results, result)
}

// stepResult records the rval into s and, on success, runs parse.
func stepResult(s *Step, parse func(o *osdc.OSDOp) error) func(o *osdc.OSDOp) {
	return func(o *osdc.OSDOp) {
		s.setRVal(o.RVal)
		if s.Err == nil && parse != nil {
			if err := parse(o); err != nil {
				s.Err = err
			}
		}
	}
}

// assertions shared by both kinds of operation
func (l *opList) assertExists() { l.add(osdc.AssertExists(), nil) }
func (l *opList) assertVersion(v uint64) {
	l.add(osdc.AssertVersion(v), nil)
}
func (l *opList) cmpXattr(name string, op CmpXattrOp, value []byte) {
	l.add(osdc.CmpXattr(name, uint8(op), osdc.CmpXattrModeString, value), nil)
}

// run executes the operations on oid and distributes the results.
func (l *opList) run(ctx context.Context, io *IOContext, oid string, flags uint32, mtime time.Time) error {
	if len(l.ops) == 0 {
		return fmt.Errorf("rados: empty operation: %w", ErrInvalid)
	}
	if oid == "" {
		return fmt.Errorf("rados: empty object name: %w", ErrInvalid)
	}
	ctx, cancel := io.conn.opContext(ctx)
	defer cancel()
	req := io.request(oid, flags, l.ops)
	req.MTime = mtime
	rep, err := io.conn.ob.Do(ctx, req)
	if rep != nil {
		l.version = rep.Version
		for i := range rep.Ops {
			if i < len(l.results) && l.results[i] != nil {
				l.results[i](&rep.Ops[i])
			}
		}
	}
	return err
}

// WriteOp is a compound write: operations on one object that the OSD
// applies atomically and in order — all or none. Build it, then run it
// with IOContext.OperateWrite. A WriteOp is not safe for concurrent use.
type WriteOp struct {
	l     opList
	mtime time.Time
}

// NewWriteOp returns an empty compound write.
func NewWriteOp() *WriteOp { return &WriteOp{} }

// Create creates the object (exclusive: fail with ErrExists if it
// exists).
func (w *WriteOp) Create(exclusive bool) { w.l.add(osdc.Create(exclusive), nil) }

// Write writes data at off.
func (w *WriteOp) Write(data []byte, off uint64) { w.l.add(osdc.Write(off, data), nil) }

// WriteFull replaces the object's data.
func (w *WriteOp) WriteFull(data []byte) { w.l.add(osdc.WriteFull(data), nil) }

// Append appends data.
func (w *WriteOp) Append(data []byte) { w.l.add(osdc.Append(data), nil) }

// Truncate sets the object's size.
func (w *WriteOp) Truncate(size uint64) { w.l.add(osdc.Truncate(size), nil) }

// Zero zeroes a range.
func (w *WriteOp) Zero(off, length uint64) { w.l.add(osdc.Zero(off, length), nil) }

// Remove deletes the object.
func (w *WriteOp) Remove() { w.l.add(osdc.Delete(), nil) }

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
	w.l.add(osdc.Call(class, method, in), stepResult(&s.Step, func(o *osdc.OSDOp) error {
		s.Output = o.OutData
		return nil
	}))
	return s
}

// SetMTime sets the modification time the write records (default: now).
func (w *WriteOp) SetMTime(t time.Time) { w.mtime = t }

// Version returns the object's version after the write ran.
func (w *WriteOp) Version() uint64 { return w.l.version }

// OperateWrite runs a compound write on oid.
func (io *IOContext) OperateWrite(ctx context.Context, oid string, w *WriteOp) error {
	return w.l.run(ctx, io, oid, osdc.FlagWrite, w.mtime)
}

// ReadOp is a compound read: operations on one object that the OSD runs
// in order. Each method returns a step that holds its result once the
// op has run with IOContext.OperateRead. A ReadOp is not safe for
// concurrent use.
type ReadOp struct {
	l opList
}

// NewReadOp returns an empty compound read.
func NewReadOp() *ReadOp { return &ReadOp{} }

// ReadStep holds the bytes a read returned.
type ReadStep struct {
	Step
	Data []byte
}

// StatStep holds an object's size and modification time.
type StatStep struct {
	Step
	Size    uint64
	ModTime time.Time
}

// XattrsStep holds extended attributes.
type XattrsStep struct {
	Step
	Xattrs map[string][]byte
}

// OmapStep holds omap entries (in key order) and whether more follow.
type OmapStep struct {
	Step
	Entries []KeyValue
	More    bool
}

// OmapKeysStep holds omap keys and whether more follow.
type OmapKeysStep struct {
	Step
	Keys []string
	More bool
}

// ExecStep holds a class method's output.
type ExecStep struct {
	Step
	Output []byte
}

// Read reads length bytes at off (0: to the end).
func (r *ReadOp) Read(off, length uint64) *ReadStep {
	s := &ReadStep{}
	r.l.add(osdc.Read(off, length), stepResult(&s.Step, func(o *osdc.OSDOp) error {
		s.Data = o.OutData
		return nil
	}))
	return s
}

// Stat returns the object's size and modification time.
func (r *ReadOp) Stat() *StatStep {
	s := &StatStep{}
	r.l.add(osdc.Stat(), stepResult(&s.Step, func(o *osdc.OSDOp) error {
		size, mtime, err := osdc.ParseStat(o.OutData)
		s.Size, s.ModTime = size, mtime.Time()
		return err
	}))
	return s
}

// GetXattr reads one extended attribute.
func (r *ReadOp) GetXattr(name string) *ReadStep {
	s := &ReadStep{}
	r.l.add(osdc.GetXattr(name), stepResult(&s.Step, func(o *osdc.OSDOp) error {
		s.Data = o.OutData
		return nil
	}))
	return s
}

// ListXattrs reads every extended attribute.
func (r *ReadOp) ListXattrs() *XattrsStep {
	s := &XattrsStep{}
	r.l.add(osdc.GetXattrs(), stepResult(&s.Step, func(o *osdc.OSDOp) error {
		var err error
		s.Xattrs, err = osdc.ParseXattrs(o.OutData)
		return err
	}))
	return s
}

// GetOmapValues reads up to max omap entries after startAfter whose keys
// start with prefix.
func (r *ReadOp) GetOmapValues(startAfter, prefix string, max int) *OmapStep {
	s := &OmapStep{}
	r.l.add(osdc.OmapGetVals(startAfter, prefix, uint64(max)), stepResult(&s.Step, func(o *osdc.OSDOp) error {
		var err error
		s.Entries, s.More, err = osdc.ParseOmapVals(o.OutData)
		return err
	}))
	return s
}

// GetOmapValuesByKeys reads the omap entries with the given keys.
func (r *ReadOp) GetOmapValuesByKeys(keys []string) *OmapStep {
	s := &OmapStep{}
	r.l.add(osdc.OmapGetValsByKeys(keys), stepResult(&s.Step, func(o *osdc.OSDOp) error {
		var err error
		s.Entries, _, err = osdc.ParseOmapVals(o.OutData)
		return err
	}))
	return s
}

// GetOmapKeys reads up to max omap keys after startAfter.
func (r *ReadOp) GetOmapKeys(startAfter string, max int) *OmapKeysStep {
	s := &OmapKeysStep{}
	r.l.add(osdc.OmapGetKeys(startAfter, uint64(max)), stepResult(&s.Step, func(o *osdc.OSDOp) error {
		var err error
		s.Keys, s.More, err = osdc.ParseOmapKeys(o.OutData)
		return err
	}))
	return s
}

// GetOmapHeader reads the omap header.
func (r *ReadOp) GetOmapHeader() *ReadStep {
	s := &ReadStep{}
	r.l.add(osdc.OmapGetHeader(), stepResult(&s.Step, func(o *osdc.OSDOp) error {
		s.Data = o.OutData
		return nil
	}))
	return s
}

// Exec calls a read-only class method.
func (r *ReadOp) Exec(class, method string, in []byte) *ExecStep {
	s := &ExecStep{}
	r.l.add(osdc.Call(class, method, in), stepResult(&s.Step, func(o *osdc.OSDOp) error {
		s.Output = o.OutData
		return nil
	}))
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

// Version returns the object's version, after the read ran.
func (r *ReadOp) Version() uint64 { return r.l.version }

// OperateRead runs a compound read on oid. When an operation fails, the
// error is returned and the steps up to it hold their results.
func (io *IOContext) OperateRead(ctx context.Context, oid string, r *ReadOp) error {
	return r.l.run(ctx, io, oid, osdc.FlagRead, time.Time{})
}
