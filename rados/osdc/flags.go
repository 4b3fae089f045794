package osdc

// Request flags (CEPH_OSD_FLAG_*), carried in MOSDOp and echoed in
// MOSDOpReply.
const (
	FlagAck             uint32 = 0x0001
	FlagOnNVRAM         uint32 = 0x0002
	FlagOnDisk          uint32 = 0x0004
	FlagRetry           uint32 = 0x0008
	FlagRead            uint32 = 0x0010
	FlagWrite           uint32 = 0x0020
	FlagOrderSnap       uint32 = 0x0040
	FlagBalanceReads    uint32 = 0x0100
	FlagParallelExec    uint32 = 0x0200
	FlagPGOp            uint32 = 0x0400
	FlagExec            uint32 = 0x0800
	FlagLocalizeReads   uint32 = 0x2000
	FlagRWOrdered       uint32 = 0x4000
	FlagIgnoreCache     uint32 = 0x8000
	FlagSkipRWLocks     uint32 = 0x10000
	FlagIgnoreOverlay   uint32 = 0x20000
	FlagFlush           uint32 = 0x40000
	FlagMapSnapClone    uint32 = 0x80000
	FlagEnforceSnapc    uint32 = 0x100000
	FlagRedirected      uint32 = 0x200000
	FlagKnownRedir      uint32 = 0x400000
	FlagFullTry         uint32 = 0x800000
	FlagFullForce       uint32 = 0x1000000
	FlagIgnoreRedirect  uint32 = 0x2000000
	FlagReturnVec       uint32 = 0x4000000
	FlagSupportsPoolEIO uint32 = 0x8000000
)

// Per-operation flags (CEPH_OSD_OP_FLAG_*), in OSDOp.Flags.
const (
	OpFlagExcl              uint32 = 0x1 // exclusive create
	OpFlagFailOK            uint32 = 0x2 // continue the compound op despite this op failing
	OpFlagFadviseRandom     uint32 = 0x4
	OpFlagFadviseSequential uint32 = 0x8
	OpFlagFadviseWillNeed   uint32 = 0x10
	OpFlagFadviseDontNeed   uint32 = 0x20
	OpFlagFadviseNoCache    uint32 = 0x40
	OpFlagWithReference     uint32 = 0x80
	OpFlagBypassCleanCache  uint32 = 0x100
)

// OSD map flags (CEPH_OSDMAP_*) the objecter acts on.
const (
	MapFlagFull        uint32 = 1 << 1
	MapFlagPauseRead   uint32 = 1 << 2
	MapFlagPauseWrite  uint32 = 1 << 3
	MapFlagSortBitwise uint32 = 1 << 15
)

// Special snapshot ids.
const (
	// SnapHead (CEPH_NOSNAP) addresses the live object, not a snapshot.
	SnapHead uint64 = ^uint64(0) - 1
	// SnapDir (CEPH_SNAPDIR) addresses an object's snapshot directory.
	SnapDir uint64 = ^uint64(0)
)

// AllNamespaces, as a namespace, makes listing return the objects of
// every namespace (LIBRADOS_ALL_NSPACES).
const AllNamespaces = "\x01"

// Watch operations (CEPH_OSD_WATCH_OP_*), in the watch union of OpWatch.
const (
	WatchOpUnwatch   uint8 = 0
	WatchOpWatch     uint8 = 3
	WatchOpReconnect uint8 = 5
	WatchOpPing      uint8 = 7
)

// Watch events (CEPH_WATCH_EVENT_*), in MWatchNotify.
const (
	WatchEventNotify         uint8 = 1
	WatchEventNotifyComplete uint8 = 2
	WatchEventDisconnect     uint8 = 3
)

// Backoff operations (CEPH_OSD_BACKOFF_OP_*), in MOSDBackoff.
const (
	BackoffBlock    uint8 = 1
	BackoffAckBlock uint8 = 2
	BackoffUnblock  uint8 = 3
)

// Comparison operators and modes for OpCmpXattr.
const (
	CmpXattrEQ  uint8 = 1
	CmpXattrNE  uint8 = 2
	CmpXattrGT  uint8 = 3
	CmpXattrGTE uint8 = 4
	CmpXattrLT  uint8 = 5
	CmpXattrLTE uint8 = 6

	CmpXattrModeString uint8 = 1
	CmpXattrModeU64    uint8 = 2
)

// Message types (CEPH_MSG_*) the objecter sends and receives.
const (
	MsgOSDMap      uint16 = 41
	MsgOSDOp       uint16 = 42
	MsgOSDOpReply  uint16 = 43
	MsgWatchNotify uint16 = 44
	MsgOSDBackoff  uint16 = 61
)
