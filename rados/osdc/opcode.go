package osdc

import "fmt"

// OpCode is an object operation code (CEPH_OSD_OP_*). Its top nibble
// says whether the operation reads (0x1000), writes (0x2000) or both, and
// the next one what it touches (data 0x200, xattrs 0x300, class methods
// 0x400, a whole placement group 0x500).
type OpCode uint16

const (
	opModeMask = 0xf000
	opModeRD   = 0x1000
	opModeWR   = 0x2000
	opModeRMW  = 0x3000
	opTypeMask = 0x0f00
	opTypeData = 0x0200
	opTypeAttr = 0x0300
	opTypeExec = 0x0400
	opTypePG   = 0x0500
)

// Operation codes.
const (
	OpRead              OpCode = opModeRD | opTypeData | 1
	OpStat              OpCode = opModeRD | opTypeData | 2
	OpMapExt            OpCode = opModeRD | opTypeData | 3
	OpSparseRead        OpCode = opModeRD | opTypeData | 5
	OpNotify            OpCode = opModeRD | opTypeData | 6
	OpNotifyAck         OpCode = opModeRD | opTypeData | 7
	OpAssertVer         OpCode = opModeRD | opTypeData | 8
	OpListWatchers      OpCode = opModeRD | opTypeData | 9
	OpListSnaps         OpCode = opModeRD | opTypeData | 10
	OpOmapGetKeys       OpCode = opModeRD | opTypeData | 17
	OpOmapGetVals       OpCode = opModeRD | opTypeData | 18
	OpOmapGetHeader     OpCode = opModeRD | opTypeData | 19
	OpOmapGetValsByKeys OpCode = opModeRD | opTypeData | 20
	OpOmapCmp           OpCode = opModeRD | opTypeData | 25
	OpChecksum          OpCode = opModeRD | opTypeData | 31
	OpCmpExt            OpCode = opModeRD | opTypeData | 32

	OpWrite          OpCode = opModeWR | opTypeData | 1
	OpWriteFull      OpCode = opModeWR | opTypeData | 2
	OpTruncate       OpCode = opModeWR | opTypeData | 3
	OpZero           OpCode = opModeWR | opTypeData | 4
	OpDelete         OpCode = opModeWR | opTypeData | 5
	OpAppend         OpCode = opModeWR | opTypeData | 6
	OpCreate         OpCode = opModeWR | opTypeData | 13
	OpRollback       OpCode = opModeWR | opTypeData | 14
	OpWatch          OpCode = opModeWR | opTypeData | 15
	OpOmapSetVals    OpCode = opModeWR | opTypeData | 21
	OpOmapSetHeader  OpCode = opModeWR | opTypeData | 22
	OpOmapClear      OpCode = opModeWR | opTypeData | 23
	OpOmapRmKeys     OpCode = opModeWR | opTypeData | 24
	OpSetAllocHint   OpCode = opModeWR | opTypeData | 35
	OpWriteSame      OpCode = opModeWR | opTypeData | 38
	OpOmapRmKeyRange OpCode = opModeWR | opTypeData | 44

	OpGetXattr  OpCode = opModeRD | opTypeAttr | 1
	OpGetXattrs OpCode = opModeRD | opTypeAttr | 2
	OpCmpXattr  OpCode = opModeRD | opTypeAttr | 3
	OpSetXattr  OpCode = opModeWR | opTypeAttr | 1
	OpSetXattrs OpCode = opModeWR | opTypeAttr | 2
	OpRmXattr   OpCode = opModeWR | opTypeAttr | 4

	// OpCall runs an object class method. Its mode bits say "read", but
	// whether a call writes depends on the method; callers say so with
	// the request's flags.
	OpCall OpCode = opModeRD | opTypeExec | 1

	OpPGLS        OpCode = opModeRD | opTypePG | 1
	OpPGLSFilter  OpCode = opModeRD | opTypePG | 2
	OpPGNLS       OpCode = opModeRD | opTypePG | 5
	OpPGNLSFilter OpCode = opModeRD | opTypePG | 6
)

// opName returns Ceph's name for c, or "" for codes this package does
// not know.
func opName(c OpCode) string {
	switch c {
	case OpRead:
		return "read"
	case OpStat:
		return "stat"
	case OpMapExt:
		return "mapext"
	case OpSparseRead:
		return "sparse-read"
	case OpNotify:
		return "notify"
	case OpNotifyAck:
		return "notify-ack"
	case OpAssertVer:
		return "assert-version"
	case OpListWatchers:
		return "list-watchers"
	case OpListSnaps:
		return "list-snaps"
	case OpOmapGetKeys:
		return "omap-get-keys"
	case OpOmapGetVals:
		return "omap-get-vals"
	case OpOmapGetHeader:
		return "omap-get-header"
	case OpOmapGetValsByKeys:
		return "omap-get-vals-by-keys"
	case OpOmapCmp:
		return "omap-cmp"
	case OpChecksum:
		return "checksum"
	case OpCmpExt:
		return "cmpext"
	case OpWrite:
		return "write"
	case OpWriteFull:
		return "writefull"
	case OpTruncate:
		return "truncate"
	case OpZero:
		return "zero"
	case OpDelete:
		return "delete"
	case OpAppend:
		return "append"
	case OpCreate:
		return "create"
	case OpRollback:
		return "rollback"
	case OpWatch:
		return "watch"
	case OpOmapSetVals:
		return "omap-set-vals"
	case OpOmapSetHeader:
		return "omap-set-header"
	case OpOmapClear:
		return "omap-clear"
	case OpOmapRmKeys:
		return "omap-rm-keys"
	case OpSetAllocHint:
		return "set-alloc-hint"
	case OpWriteSame:
		return "write-same"
	case OpOmapRmKeyRange:
		return "omap-rm-key-range"
	case OpGetXattr:
		return "getxattr"
	case OpGetXattrs:
		return "getxattrs"
	case OpCmpXattr:
		return "cmpxattr"
	case OpSetXattr:
		return "setxattr"
	case OpSetXattrs:
		return "setxattrs"
	case OpRmXattr:
		return "rmxattr"
	case OpCall:
		return "call"
	case OpPGLS:
		return "pgls"
	case OpPGLSFilter:
		return "pgls-filter"
	case OpPGNLS:
		return "pgnls"
	case OpPGNLSFilter:
		return "pgnls-filter"
	}
	return ""
}

// String returns Ceph's name for c ("read", "omap-get-vals"...).
func (c OpCode) String() string {
	if n := opName(c); n != "" {
		return n
	}
	return fmt.Sprintf("op(%#x)", uint16(c))
}

// IsRead reports whether c may read (its mode has the read bit).
func (c OpCode) IsRead() bool { return c&opModeRD != 0 && c&opModeMask != 0x8000 }

// IsWrite reports whether c may write.
func (c OpCode) IsWrite() bool { return c&opModeWR != 0 && c&opModeMask != 0x8000 }

// IsPG reports whether c operates on a whole placement group (listing).
func (c OpCode) IsPG() bool { return c&opTypeMask == opTypePG }
