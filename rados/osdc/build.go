package osdc

import (
	"encoding/binary"
	"slices"

	"github.com/purerbd/purerbd/rados/denc"
)

// The functions below build single operations the way librados'
// ObjectOperation does, byte for byte. Combine several in one Request to
// have an OSD execute them atomically, in order.

// Read reads length bytes at off (length 0: to the end of the object).
func Read(off, length uint64) OSDOp {
	o := OSDOp{Code: OpRead}
	o.SetExtent(off, length, 0, 0)
	return o
}

// SparseRead reads like Read but returns only the allocated extents
// (ParseSparseRead).
func SparseRead(off, length uint64) OSDOp {
	o := OSDOp{Code: OpSparseRead}
	o.SetExtent(off, length, 0, 0)
	return o
}

// Write writes data at off.
func Write(off uint64, data []byte) OSDOp {
	o := OSDOp{Code: OpWrite, InData: data}
	o.SetExtent(off, uint64(len(data)), 0, 0)
	return o
}

// WriteFull replaces the object's data with data.
func WriteFull(data []byte) OSDOp {
	o := OSDOp{Code: OpWriteFull, InData: data}
	o.SetExtent(0, uint64(len(data)), 0, 0)
	return o
}

// Append appends data to the object.
func Append(data []byte) OSDOp {
	o := OSDOp{Code: OpAppend, InData: data}
	o.SetExtent(0, uint64(len(data)), 0, 0)
	return o
}

// WriteSame writes data repeatedly over length bytes at off.
func WriteSame(off, length uint64, data []byte) OSDOp {
	o := OSDOp{Code: OpWriteSame, InData: data}
	binary.LittleEndian.PutUint64(o.Args[0:], off)
	binary.LittleEndian.PutUint64(o.Args[8:], length)
	binary.LittleEndian.PutUint64(o.Args[16:], uint64(len(data)))
	return o
}

// Truncate sets the object's size.
func Truncate(size uint64) OSDOp {
	o := OSDOp{Code: OpTruncate}
	o.SetExtent(size, 0, 0, 0)
	return o
}

// Zero zeroes length bytes at off (punching a hole where it can).
func Zero(off, length uint64) OSDOp {
	o := OSDOp{Code: OpZero}
	o.SetExtent(off, length, 0, 0)
	return o
}

// Delete removes the object.
func Delete() OSDOp {
	o := OSDOp{Code: OpDelete}
	o.SetExtent(0, 0, 0, 0)
	return o
}

// Create creates the object; exclusive makes it fail with EEXIST when the
// object exists.
func Create(exclusive bool) OSDOp {
	o := OSDOp{Code: OpCreate}
	if exclusive {
		o.Flags = OpFlagExcl
	}
	return o
}

// Stat returns the object's size and mtime (ParseStat).
func Stat() OSDOp { return OSDOp{Code: OpStat} }

// AssertExists fails the request with ENOENT unless the object exists
// (librados' assert_exists is a stat whose output is ignored).
func AssertExists() OSDOp { return Stat() }

// AssertVersion fails the request unless the object's version is ver
// (ERANGE when older, EOVERFLOW when newer).
func AssertVersion(ver uint64) OSDOp {
	o := OSDOp{Code: OpAssertVer}
	o.SetAssertVersion(ver)
	return o
}

// CmpExt compares the object's bytes at off with cmp; a mismatch fails
// the request with -MAX_ERRNO - offset of the first difference.
func CmpExt(off uint64, cmp []byte) OSDOp {
	o := OSDOp{Code: OpCmpExt, InData: cmp}
	o.SetExtent(off, uint64(len(cmp)), 0, 0)
	return o
}

// SetAllocHint tells the OSD the object's expected size and write size.
func SetAllocHint(objectSize, writeSize uint64, flags uint32) OSDOp {
	o := OSDOp{Code: OpSetAllocHint}
	o.SetAllocHint(objectSize, writeSize, flags)
	return o
}

// Rollback rolls the object back to snapshot snapID.
func Rollback(snapID uint64) OSDOp {
	o := OSDOp{Code: OpRollback}
	o.SetSnap(snapID)
	return o
}

func xattrOp(code OpCode, name string, value []byte, cmpOp, cmpMode uint8) OSDOp {
	in := make([]byte, 0, len(name)+len(value))
	in = append(append(in, name...), value...)
	o := OSDOp{Code: code, InData: in}
	o.SetXattr(uint32(len(name)), uint32(len(value)), cmpOp, cmpMode)
	return o
}

// GetXattr reads one extended attribute (OutData is its value).
func GetXattr(name string) OSDOp { return xattrOp(OpGetXattr, name, nil, 0, 0) }

// GetXattrs reads every extended attribute (ParseXattrs).
func GetXattrs() OSDOp { return OSDOp{Code: OpGetXattrs} }

// SetXattr sets an extended attribute.
func SetXattr(name string, value []byte) OSDOp { return xattrOp(OpSetXattr, name, value, 0, 0) }

// RmXattr removes an extended attribute.
func RmXattr(name string) OSDOp { return xattrOp(OpRmXattr, name, nil, 0, 0) }

// CmpXattr fails the request with ECANCELED unless the attribute compares
// as cmpOp (CmpXattrEQ...) with value, in mode CmpXattrModeString or
// CmpXattrModeU64.
func CmpXattr(name string, cmpOp, mode uint8, value []byte) OSDOp {
	return xattrOp(OpCmpXattr, name, value, cmpOp, mode)
}

// dataOp is an operation whose input is an encoding, described by the
// extent (offset 0, length of the input), as librados sends omap ops.
func dataOp(code OpCode, in []byte) OSDOp {
	o := OSDOp{Code: code, InData: in}
	o.SetExtent(0, uint64(len(in)), 0, 0)
	return o
}

// OmapGetKeys lists up to max omap keys after startAfter
// (ParseOmapKeys).
func OmapGetKeys(startAfter string, max uint64) OSDOp {
	e := denc.NewEncoder(nil)
	e.String(startAfter)
	e.U64(max)
	return dataOp(OpOmapGetKeys, e.Bytes())
}

// OmapGetVals lists up to max omap entries after startAfter whose keys
// start with filterPrefix (ParseOmapVals).
func OmapGetVals(startAfter, filterPrefix string, max uint64) OSDOp {
	e := denc.NewEncoder(nil)
	e.String(startAfter)
	e.U64(max)
	e.String(filterPrefix)
	return dataOp(OpOmapGetVals, e.Bytes())
}

// sortedSet returns keys sorted and without duplicates, as std::set
// encodes them.
func sortedSet(keys []string) []string {
	s := slices.Clone(keys)
	slices.Sort(s)
	return slices.Compact(s)
}

func encodeStringSet(keys []string) []byte {
	e := denc.NewEncoder(nil)
	denc.PutList(e, sortedSet(keys), func(e *denc.Encoder, k string) { e.String(k) })
	return e.Bytes()
}

// OmapGetValsByKeys reads the omap entries with the given keys
// (ParseOmapVals; missing keys are left out).
func OmapGetValsByKeys(keys []string) OSDOp {
	return dataOp(OpOmapGetValsByKeys, encodeStringSet(keys))
}

// OmapSetVals sets omap entries.
func OmapSetVals(kv map[string][]byte) OSDOp {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e := denc.NewEncoder(nil)
	denc.PutMap(e, kv, keys, func(e *denc.Encoder, k string, v []byte) {
		e.String(k)
		e.Blob(v)
	})
	return dataOp(OpOmapSetVals, e.Bytes())
}

// OmapRmKeys removes omap entries.
func OmapRmKeys(keys []string) OSDOp { return dataOp(OpOmapRmKeys, encodeStringSet(keys)) }

// OmapRmKeyRange removes the omap entries in [begin, end).
func OmapRmKeyRange(begin, end string) OSDOp {
	e := denc.NewEncoder(nil)
	e.String(begin)
	e.String(end)
	return dataOp(OpOmapRmKeyRange, e.Bytes())
}

// OmapClear removes every omap entry (not the header).
func OmapClear() OSDOp { return OSDOp{Code: OpOmapClear} }

// OmapGetHeader reads the omap header (OutData).
func OmapGetHeader() OSDOp { return OSDOp{Code: OpOmapGetHeader} }

// OmapSetHeader sets the omap header.
func OmapSetHeader(header []byte) OSDOp { return dataOp(OpOmapSetHeader, header) }

// Call runs method of object class class with input in; OutData is the
// method's output. Class and method names are at most 255 bytes.
func Call(class, method string, in []byte) OSDOp {
	buf := make([]byte, 0, len(class)+len(method)+len(in))
	buf = append(append(append(buf, class...), method...), in...)
	o := OSDOp{Code: OpCall, InData: buf}
	o.SetClass(uint8(len(class)), uint8(len(method)), uint32(len(in)))
	return o
}

// PGNLS lists up to count objects of a placement group from cursor on
// (ParseNLSResponse); the request's namespace selects which objects.
func PGNLS(count uint64, cursor HObject, startEpoch uint32) OSDOp {
	e := denc.NewEncoder(nil)
	cursor.Encode(e)
	o := OSDOp{Code: OpPGNLS, InData: e.Bytes()}
	o.SetPGLS(count, startEpoch)
	return o
}

// WatchOp is a watch operation: WatchOpWatch registers cookie on the
// object (timeout 0: the OSD's default), WatchOpReconnect re-registers it
// after a reconnect, WatchOpPing confirms it, WatchOpUnwatch removes it.
func WatchOp(cookie uint64, op uint8, gen, timeout uint32) OSDOp {
	o := OSDOp{Code: OpWatch}
	o.SetWatch(cookie, op, gen, timeout)
	return o
}

// Notify sends payload to the object's watchers; timeout in seconds
// (0: the OSD's default). OutData is the notify id (ParseNotifyID); the
// outcome arrives later as an MWatchNotify NOTIFY_COMPLETE.
func Notify(cookie uint64, timeout uint32, payload []byte) OSDOp {
	e := denc.NewEncoder(make([]byte, 0, 12+len(payload)))
	e.U32(1) // prot_ver
	e.U32(timeout)
	e.Blob(payload)
	o := OSDOp{Code: OpNotify, InData: e.Bytes()}
	o.SetCookie(cookie)
	return o
}

// NotifyAck acknowledges a notification received on watch cookie, with
// an optional reply for the notifier.
func NotifyAck(notifyID, cookie uint64, reply []byte) OSDOp {
	e := denc.NewEncoder(make([]byte, 0, 20+len(reply)))
	e.U64(notifyID)
	e.U64(cookie)
	e.Blob(reply)
	return OSDOp{Code: OpNotifyAck, InData: e.Bytes()}
}

// ListWatchers lists the object's watchers (ParseWatchers).
func ListWatchers() OSDOp { return OSDOp{Code: OpListWatchers} }
