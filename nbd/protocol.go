package nbd

// Wire constants of the NBD protocol (doc/proto.md). Every number on the wire
// is big-endian.

const (
	magicNBD            = 0x4e42444d41474943 // "NBDMAGIC"
	magicIHaveOpt       = 0x49484156454F5054 // "IHAVEOPT"
	magicOptReply       = 0x0003e889045565a9
	magicRequest        = 0x25609513
	magicSimpleReply    = 0x67446698
	magicStructuredRepl = 0x668e33ef
)

// Handshake flags (server) and client flags.
const (
	flagFixedNewstyle = 1 << 0
	flagNoZeroes      = 1 << 1

	clientFlagFixedNewstyle = 1 << 0
	clientFlagNoZeroes      = 1 << 1
	clientFlagsKnown        = clientFlagFixedNewstyle | clientFlagNoZeroes
)

// Transmission flags.
const (
	flagHasFlags        = 1 << 0
	flagReadOnly        = 1 << 1
	flagSendFlush       = 1 << 2
	flagSendFUA         = 1 << 3
	flagRotational      = 1 << 4
	flagSendTrim        = 1 << 5
	flagSendWriteZeroes = 1 << 6
	flagSendDF          = 1 << 7
	flagCanMultiConn    = 1 << 8
	flagSendCache       = 1 << 10
	flagSendFastZero    = 1 << 11
)

// Option types.
const (
	optExportName      = 1
	optAbort           = 2
	optList            = 3
	optStartTLS        = 5
	optInfo            = 6
	optGo              = 7
	optStructuredReply = 8
	optListMetaContext = 9
	optSetMetaContext  = 10
)

// Option reply types. Errors have bit 31 set.
const (
	repAck         = 1
	repServer      = 2
	repInfo        = 3
	repMetaContext = 4

	repErrUnsup          = 1<<31 + 1
	repErrPolicy         = 1<<31 + 2
	repErrInvalid        = 1<<31 + 3
	repErrPlatform       = 1<<31 + 4
	repErrTLSReqd        = 1<<31 + 5
	repErrUnknown        = 1<<31 + 6
	repErrShutdown       = 1<<31 + 7
	repErrBlockSizeReqd  = 1<<31 + 8
	repErrTooBig         = 1<<31 + 9
	repErrExtHeaderReqd  = 1<<31 + 10
	repErrorBit          = 1 << 31
	optionReplyHeaderLen = 20
)

// Information types in NBD_REP_INFO.
const (
	infoExport      = 0
	infoName        = 1
	infoDescription = 2
	infoBlockSize   = 3
)

// Request types.
const (
	cmdRead        = 0
	cmdWrite       = 1
	cmdDisc        = 2
	cmdFlush       = 3
	cmdTrim        = 4
	cmdCache       = 5
	cmdWriteZeroes = 6
	cmdBlockStatus = 7
)

// Command flags.
const (
	cmdFlagFUA      = 1 << 0
	cmdFlagNoHole   = 1 << 1
	cmdFlagDF       = 1 << 2
	cmdFlagReqOne   = 1 << 3
	cmdFlagFastZero = 1 << 4
)

// Structured reply flags and chunk types.
const (
	replyFlagDone = 1 << 0

	replyTypeNone        = 0
	replyTypeOffsetData  = 1
	replyTypeOffsetHole  = 2
	replyTypeBlockStatus = 5
	replyTypeError       = 1<<15 + 1
	replyTypeErrorOffset = 1<<15 + 2
)

// Block status flags of the base:allocation context.
const (
	stateHole = 1 << 0
	stateZero = 1 << 1
)

// Sizes.
const (
	requestHeaderLen    = 28
	simpleReplyLen      = 16
	structuredHeaderLen = 20

	// maxStringLen is the protocol's hard limit on any string.
	maxStringLen = 4096

	// DefaultMaxPayload is the largest READ or WRITE payload accepted
	// (2^25, the size every client may assume).
	DefaultMaxPayload = 32 << 20
	// DefaultPreferredBlockSize is advertised when an Export sets none.
	DefaultPreferredBlockSize = 4096

	// maxOptionLen bounds the option data the server reads into memory.
	// Longer options are consumed without being stored and refused with
	// NBD_REP_ERR_TOO_BIG, up to maxOptionDiscard; beyond that the
	// connection is dropped.
	maxOptionLen     = 64 << 10
	maxOptionDiscard = 16 << 20

	// maxExtents bounds the descriptors in one block status chunk (the
	// protocol allows 2^20; 2^16 keeps a reply at 512 KiB).
	maxExtents = 1 << 16

	// metaContextBaseAllocation is the id given to base:allocation;
	// dirty bitmaps get the ids after it, in the backend's order.
	metaContextBaseAllocation = 1
	baseAllocation            = "base:allocation"
	qemuDirtyBitmap           = "qemu:dirty-bitmap:"
	// extentDirty flags a changed range in a qemu:dirty-bitmap context.
	extentDirty = 1
)
