package ublk

import (
	"encoding/binary"
	"fmt"
)

// Control and I/O command numbers (include/uapi/linux/ublk_cmd.h).
const (
	cmdGetDevInfo        = 0x02
	cmdAddDev            = 0x04
	cmdDelDev            = 0x05
	cmdStartDev          = 0x06
	cmdStopDev           = 0x07
	cmdSetParams         = 0x08
	cmdGetParams         = 0x09
	cmdStartUserRecovery = 0x10
	cmdEndUserRecovery   = 0x11
	cmdGetFeatures       = 0x13
	cmdUpdateSize        = 0x15

	ioFetchReq        = 0x20
	ioCommitAndFetch  = 0x21
	ioPrepIOCmds      = 0x25 // UBLK_U_IO_PREP_IO_CMDS (batch I/O)
	ioCommitIOCmds    = 0x26 // UBLK_U_IO_COMMIT_IO_CMDS
	ioFetchIOCmds     = 0x27 // UBLK_U_IO_FETCH_IO_CMDS
	batchElemSize     = 8    // struct ublk_elem_header: tag, buf_index, result
	ctrlCmdSize       = 32   // struct ublksrv_ctrl_cmd
	ioCmdSize         = 16   // struct ublksrv_io_cmd
	devInfoSize       = 64   // struct ublksrv_ctrl_dev_info
	ioDescSize        = 24   // struct ublksrv_io_desc
	paramsSize        = 64   // struct ublk_params up to the discard part, padded
	featuresSize      = 8
	maxQueueDepth     = 4096
	ioResAbort        = -19 // UBLK_IO_RES_ABORT: -ENODEV
	noQueue           = 0xffff
	anyDevice         = 0xffffffff
	sectorShift       = 9
	ioctlDirRead      = 2
	ioctlDirReadWrite = 3
	ioBufOffset       = 0x80000000 // UBLKSRV_IO_BUF_OFFSET: requests' data with user copy
)

// Device flags (UBLK_F_*).
const (
	FlagURingCmdCompInTask  = 1 << 1
	FlagNeedGetData         = 1 << 2
	FlagUserRecovery        = 1 << 3
	FlagUserRecoveryReissue = 1 << 4
	FlagUnprivilegedDev     = 1 << 5
	FlagCmdIoctlEncode      = 1 << 6
	FlagUserCopy            = 1 << 7
	// FlagBatchIO (UBLK_F_BATCH_IO, Linux 7.0) fetches a queue's
	// requests in batches through one multishot command and commits
	// their results in batches from any thread.
	FlagBatchIO = 1 << 15
)

// FeatureUpdateSize (UBLK_F_UPDATE_SIZE, Linux 6.16) says the kernel
// changes a live device's size (UPDATE_SIZE): Device.Resize.
const FeatureUpdateSize = 1 << 10

// Device states (UBLK_S_DEV_*).
const (
	StateDead     = 0
	StateLive     = 1
	StateQuiesced = 2
	StateFailIO   = 3
)

// I/O operations and flags of a descriptor (UBLK_IO_OP_*, UBLK_IO_F_*).
const (
	opRead        = 0
	opWrite       = 1
	opFlush       = 2
	opDiscard     = 3
	opWriteSame   = 4
	opWriteZeroes = 5

	ioFlagFUA     = 1 << 13
	ioFlagNoUnmap = 1 << 15
)

// Parameter types and basic attributes (UBLK_PARAM_TYPE_*, UBLK_ATTR_*).
const (
	paramTypeBasic   = 1 << 0
	paramTypeDiscard = 1 << 1

	attrReadOnly      = 1 << 0
	attrVolatileCache = 1 << 2
	attrFUA           = 1 << 3
)

// ioctlEncode is the _IOC encoding of a ublk command number, which
// kernels with UBLK_F_CMD_IOCTL_ENCODE (6.0 on, required when they are
// built without the legacy opcodes) take.
func ioctlEncode(dir, nr, size uint32) uint32 {
	return dir<<30 | size<<16 | 'u'<<8 | nr
}

// ctrlOp returns the command op for a control command, encoded or not.
func ctrlOp(nr uint32, encoded bool) uint32 {
	if !encoded {
		return nr
	}
	dir := uint32(ioctlDirReadWrite)
	switch nr {
	case cmdGetDevInfo, cmdGetParams, cmdGetFeatures:
		dir = ioctlDirRead
	}
	return ioctlEncode(dir, nr, ctrlCmdSize)
}

// ioOp returns the command op for an I/O command, encoded or not.
func ioOp(nr uint32, encoded bool) uint32 {
	if !encoded {
		return nr
	}
	return ioctlEncode(ioctlDirReadWrite, nr, ioCmdSize)
}

// ctrlCmd is struct ublksrv_ctrl_cmd.
type ctrlCmd struct {
	devID   uint32
	queueID uint16
	length  uint16
	addr    uint64
	data    [2]uint64
}

func (c ctrlCmd) encode() []byte {
	b := make([]byte, ctrlCmdSize)
	binary.LittleEndian.PutUint32(b[0:], c.devID)
	binary.LittleEndian.PutUint16(b[4:], c.queueID)
	binary.LittleEndian.PutUint16(b[6:], c.length)
	binary.LittleEndian.PutUint64(b[8:], c.addr)
	binary.LittleEndian.PutUint64(b[16:], c.data[0])
	binary.LittleEndian.PutUint64(b[24:], c.data[1])
	return b
}

// encodeBatchIO writes struct ublk_batch_io, the command of the batch
// I/O commands: the queue, the count of elements of elemBytes each in
// the command's buffer (for a fetch: of the tags it returns).
func encodeBatchIO(b []byte, queue, nrElem uint16, elemBytes uint8) {
	clear(b[:ioCmdSize])
	binary.LittleEndian.PutUint16(b[0:], queue)
	binary.LittleEndian.PutUint16(b[4:], nrElem)
	b[6] = elemBytes
}

// putBatchElem writes struct ublk_elem_header: a tag and its result
// (buffer index 0: no auto buffer registration).
func putBatchElem(b []byte, tag uint16, result int32) {
	binary.LittleEndian.PutUint16(b[0:], tag)
	binary.LittleEndian.PutUint16(b[2:], 0)
	binary.LittleEndian.PutUint32(b[4:], uint32(result))
}

// ioCmd is struct ublksrv_io_cmd.
func encodeIOCmd(b []byte, queue, tag uint16, result int32, addr uint64) {
	binary.LittleEndian.PutUint16(b[0:], queue)
	binary.LittleEndian.PutUint16(b[2:], tag)
	binary.LittleEndian.PutUint32(b[4:], uint32(result))
	binary.LittleEndian.PutUint64(b[8:], addr)
}

// DevInfo is struct ublksrv_ctrl_dev_info: a device as the kernel
// describes it (GET_DEV_INFO, and ADD_DEV's answer).
type DevInfo struct {
	Queues        uint16
	QueueDepth    uint16
	State         uint16
	MaxIOBufBytes uint32
	ID            uint32
	ServerPID     int32
	Flags         uint64
	// Tag is the server's own (ublksrv_flags): the kernel keeps what
	// ADD_DEV gave and never reads it (Config.Tag, Find).
	Tag      uint64
	OwnerUID uint32
	OwnerGID uint32
}

func (d DevInfo) encode() []byte {
	b := make([]byte, devInfoSize)
	binary.LittleEndian.PutUint16(b[0:], d.Queues)
	binary.LittleEndian.PutUint16(b[2:], d.QueueDepth)
	binary.LittleEndian.PutUint16(b[4:], d.State)
	binary.LittleEndian.PutUint32(b[8:], d.MaxIOBufBytes)
	binary.LittleEndian.PutUint32(b[12:], d.ID)
	binary.LittleEndian.PutUint32(b[16:], uint32(d.ServerPID))
	binary.LittleEndian.PutUint64(b[24:], d.Flags)
	binary.LittleEndian.PutUint64(b[32:], d.Tag)
	binary.LittleEndian.PutUint32(b[40:], d.OwnerUID) // the kernel sets its own
	binary.LittleEndian.PutUint32(b[44:], d.OwnerGID)
	return b
}

// decodeDevInfo reads the kernel's struct ublksrv_ctrl_dev_info.
func decodeDevInfo(b []byte) (DevInfo, error) {
	if len(b) < devInfoSize {
		return DevInfo{}, fmt.Errorf("ublk device info: %d bytes, want %d", len(b), devInfoSize)
	}
	d := DevInfo{
		Queues:        binary.LittleEndian.Uint16(b[0:]),
		QueueDepth:    binary.LittleEndian.Uint16(b[2:]),
		State:         binary.LittleEndian.Uint16(b[4:]),
		MaxIOBufBytes: binary.LittleEndian.Uint32(b[8:]),
		ID:            binary.LittleEndian.Uint32(b[12:]),
		ServerPID:     int32(binary.LittleEndian.Uint32(b[16:])),
		Flags:         binary.LittleEndian.Uint64(b[24:]),
		Tag:           binary.LittleEndian.Uint64(b[32:]),
		OwnerUID:      binary.LittleEndian.Uint32(b[40:]),
		OwnerGID:      binary.LittleEndian.Uint32(b[44:]),
	}
	if d.QueueDepth == 0 || d.QueueDepth > maxQueueDepth {
		return DevInfo{}, fmt.Errorf("ublk device info: queue depth %d out of range 1..%d", d.QueueDepth, maxQueueDepth)
	}
	if d.Queues == 0 {
		return DevInfo{}, fmt.Errorf("ublk device info: no queues")
	}
	return d, nil
}

// ioDesc is struct ublksrv_io_desc: one request as the kernel hands it
// to the server.
type ioDesc struct {
	op          uint8
	flags       uint32
	nrSectors   uint32
	startSector uint64
	addr        uint64
}

// decodeIODesc reads one descriptor; it checks nothing (the queue
// checks the range against the backend and the buffer size).
func decodeIODesc(b []byte) ioDesc {
	_ = b[ioDescSize-1]
	opFlags := binary.LittleEndian.Uint32(b[0:])
	return ioDesc{
		op:          uint8(opFlags),
		flags:       opFlags >> 8,
		nrSectors:   binary.LittleEndian.Uint32(b[4:]),
		startSector: binary.LittleEndian.Uint64(b[8:]),
		addr:        binary.LittleEndian.Uint64(b[16:]),
	}
}

// Params are the parameters a device is set up with (SET_PARAMS): the
// basic part, and discard when DiscardGranularity is set.
type Params struct {
	Attrs              uint32
	LogicalBSShift     uint8
	PhysicalBSShift    uint8
	IOOptShift         uint8
	IOMinShift         uint8
	MaxSectors         uint32
	DevSectors         uint64
	DiscardGranularity uint32
	MaxDiscardSectors  uint32
	MaxWriteZeroes     uint32
}

func (p Params) encode() []byte {
	b := make([]byte, paramsSize)
	types := uint32(paramTypeBasic)
	if p.DiscardGranularity != 0 {
		types |= paramTypeDiscard
	}
	binary.LittleEndian.PutUint32(b[0:], paramsSize)
	binary.LittleEndian.PutUint32(b[4:], types)
	binary.LittleEndian.PutUint32(b[8:], p.Attrs)
	b[12], b[13], b[14], b[15] = p.LogicalBSShift, p.PhysicalBSShift, p.IOOptShift, p.IOMinShift
	binary.LittleEndian.PutUint32(b[16:], p.MaxSectors)
	binary.LittleEndian.PutUint64(b[24:], p.DevSectors)
	if p.DiscardGranularity != 0 {
		binary.LittleEndian.PutUint32(b[44:], p.DiscardGranularity)
		binary.LittleEndian.PutUint32(b[48:], p.MaxDiscardSectors)
		binary.LittleEndian.PutUint32(b[52:], p.MaxWriteZeroes)
		if p.MaxDiscardSectors != 0 {
			binary.LittleEndian.PutUint16(b[56:], 1) // one segment per discard
		}
	}
	return b
}
