package nbdtest

import "encoding/binary"

// Protocol numbers, written out again from the protocol description so
// that this client does not share the server's mistakes.
const (
	MagicNBD          = 0x4e42444d41474943
	MagicIHaveOpt     = 0x49484156454F5054
	MagicOptReply     = 0x3e889045565a9
	MagicRequest      = 0x25609513
	MagicSimple       = 0x67446698
	MagicStructured   = 0x668e33ef
	FlagFixedNewstyle = 1
	FlagNoZeroes      = 2

	OptExportName      = 1
	OptAbort           = 2
	OptList            = 3
	OptStartTLS        = 5
	OptInfo            = 6
	OptGo              = 7
	OptStructuredReply = 8
	OptListMetaContext = 9
	OptSetMetaContext  = 10

	RepAck         = 1
	RepServer      = 2
	RepInfo        = 3
	RepMetaContext = 4
	RepErrUnsup    = 1<<31 + 1
	RepErrPolicy   = 1<<31 + 2
	RepErrInvalid  = 1<<31 + 3
	RepErrTLSReqd  = 1<<31 + 5
	RepErrUnknown  = 1<<31 + 6
	RepErrShutdown = 1<<31 + 7
	RepErrTooBig   = 1<<31 + 9

	InfoExport      = 0
	InfoName        = 1
	InfoDescription = 2
	InfoBlockSize   = 3

	CmdRead        = 0
	CmdWrite       = 1
	CmdDisc        = 2
	CmdFlush       = 3
	CmdTrim        = 4
	CmdCache       = 5
	CmdWriteZeroes = 6
	CmdBlockStatus = 7

	CmdFlagFUA      = 1
	CmdFlagNoHole   = 2
	CmdFlagDF       = 4
	CmdFlagReqOne   = 8
	CmdFlagFastZero = 16

	TFlagHasFlags     = 1 << 0
	TFlagReadOnly     = 1 << 1
	TFlagSendFlush    = 1 << 2
	TFlagSendFUA      = 1 << 3
	TFlagSendTrim     = 1 << 5
	TFlagSendZeroes   = 1 << 6
	TFlagSendDF       = 1 << 7
	TFlagMultiConn    = 1 << 8
	TFlagSendCache    = 1 << 10
	TFlagSendFastZero = 1 << 11

	ReplyFlagDone        = 1
	ReplyTypeNone        = 0
	ReplyTypeOffsetData  = 1
	ReplyTypeOffsetHole  = 2
	ReplyTypeBlockStatus = 5
	ReplyTypeError       = 1<<15 + 1
	ReplyTypeErrorOffset = 1<<15 + 2

	EPERM     = 1
	EIO       = 5
	EINVAL    = 22
	ENOSPC    = 28
	EOVERFLOW = 75
	ENOTSUP   = 95
	ESHUTDOWN = 108

	StateHole = 1
	StateZero = 2
)

// Option encodes an option: IHAVEOPT, option, length, data.
func Option(opt uint32, data []byte) []byte {
	b := make([]byte, 16, 16+len(data))
	binary.BigEndian.PutUint64(b, MagicIHaveOpt)
	binary.BigEndian.PutUint32(b[8:], opt)
	binary.BigEndian.PutUint32(b[12:], uint32(len(data)))
	return append(b, data...)
}

// InfoData encodes the data of NBD_OPT_INFO/NBD_OPT_GO.
func InfoData(name string, infos ...uint16) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(infos)))
	for _, i := range infos {
		b = binary.BigEndian.AppendUint16(b, i)
	}
	return b
}

// MetaContextData encodes the data of NBD_OPT_{LIST,SET}_META_CONTEXT.
func MetaContextData(export string, queries ...string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(export)))
	b = append(b, export...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(queries)))
	for _, q := range queries {
		b = binary.BigEndian.AppendUint32(b, uint32(len(q)))
		b = append(b, q...)
	}
	return b
}

// Request encodes a transmission request header followed by payload.
func Request(flags, typ uint16, cookie, off uint64, length uint32, payload []byte) []byte {
	b := make([]byte, 28, 28+len(payload))
	binary.BigEndian.PutUint32(b, MagicRequest)
	binary.BigEndian.PutUint16(b[4:], flags)
	binary.BigEndian.PutUint16(b[6:], typ)
	binary.BigEndian.PutUint64(b[8:], cookie)
	binary.BigEndian.PutUint64(b[16:], off)
	binary.BigEndian.PutUint32(b[24:], length)
	return append(b, payload...)
}
