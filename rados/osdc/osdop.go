package osdc

import (
	"encoding/binary"
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// rawOpLen is sizeof(struct ceph_osd_op): op, flags, a 28-byte union of
// per-operation arguments, payload_len.
const (
	rawOpLen   = 38
	opArgsLen  = 28
	opArgsOff  = 6
	payloadOff = opArgsOff + opArgsLen
)

// OSDOp is one operation of a request: Ceph's OSDOp. Code, Flags and
// Args are the wire struct ceph_osd_op (Args is its union, interpreted
// per operation; the Set and accessor methods know the layouts). InData
// travels in the message's data segment. After a reply, RVal holds the
// operation's own result and OutData its output.
type OSDOp struct {
	Code  OpCode
	Flags uint32
	Args  [opArgsLen]byte

	InData []byte
	// InDataCRC, when InDataCRCKnown, is crc32c.Checksum(InData), known
	// to the caller (rados.Frozen): a request whose only data this is
	// sends it rather than computing it.
	InDataCRC      uint32
	InDataCRCKnown bool

	RVal    int32
	OutData []byte

	// payloadLen is the wire payload_len as decoded (replies: the length
	// of OutData in the data segment).
	payloadLen uint32
}

// String names the operation and its main arguments.
func (o *OSDOp) String() string {
	switch o.Code {
	case OpRead, OpSparseRead, OpWrite, OpWriteFull, OpZero, OpTruncate, OpAppend:
		off, n, _, _ := o.Extent()
		return fmt.Sprintf("%s %d~%d", o.Code, off, n)
	case OpCall:
		// InData starts with the class and method names
		c, m := int(o.Args[0]), int(o.Args[1])
		if c+m <= len(o.InData) {
			return fmt.Sprintf("%s %s.%s", o.Code, o.InData[:c], o.InData[c:c+m])
		}
	}
	return o.Code.String()
}

func (o *OSDOp) encodeRaw(e *denc.Encoder, payloadLen uint32) {
	e.U16(uint16(o.Code))
	e.U32(o.Flags)
	e.Raw(o.Args[:])
	e.U32(payloadLen)
}

func (o *OSDOp) decodeRaw(d *denc.Decoder) {
	o.Code = OpCode(d.U16("ceph_osd_op op"))
	o.Flags = d.U32("ceph_osd_op flags")
	if p := d.Raw("ceph_osd_op args", opArgsLen); p != nil {
		copy(o.Args[:], p)
	}
	o.payloadLen = d.U32("ceph_osd_op payload_len")
}

// SetExtent fills the extent arguments (reads, writes, zero, truncate).
func (o *OSDOp) SetExtent(offset, length, truncateSize uint64, truncateSeq uint32) {
	binary.LittleEndian.PutUint64(o.Args[0:], offset)
	binary.LittleEndian.PutUint64(o.Args[8:], length)
	binary.LittleEndian.PutUint64(o.Args[16:], truncateSize)
	binary.LittleEndian.PutUint32(o.Args[24:], truncateSeq)
}

// Extent returns the extent arguments.
func (o *OSDOp) Extent() (offset, length, truncateSize uint64, truncateSeq uint32) {
	return binary.LittleEndian.Uint64(o.Args[0:]), binary.LittleEndian.Uint64(o.Args[8:]), binary.LittleEndian.Uint64(o.Args[16:]), binary.LittleEndian.Uint32(o.Args[24:])
}

// SetXattr fills the xattr arguments.
func (o *OSDOp) SetXattr(nameLen, valueLen uint32, cmpOp, cmpMode uint8) {
	binary.LittleEndian.PutUint32(o.Args[0:], nameLen)
	binary.LittleEndian.PutUint32(o.Args[4:], valueLen)
	o.Args[8] = cmpOp
	o.Args[9] = cmpMode
}

// SetClass fills the class-call arguments.
func (o *OSDOp) SetClass(classLen, methodLen uint8, indataLen uint32) {
	o.Args[0] = classLen
	o.Args[1] = methodLen
	o.Args[2] = 0 // argc, unused
	binary.LittleEndian.PutUint32(o.Args[3:], indataLen)
}

// SetPGLS fills the listing arguments.
func (o *OSDOp) SetPGLS(count uint64, startEpoch uint32) {
	binary.LittleEndian.PutUint64(o.Args[0:], count)
	binary.LittleEndian.PutUint32(o.Args[8:], startEpoch)
}

// SetWatch fills the watch arguments.
func (o *OSDOp) SetWatch(cookie uint64, op uint8, gen, timeout uint32) {
	binary.LittleEndian.PutUint64(o.Args[0:], cookie)
	binary.LittleEndian.PutUint64(o.Args[8:], 0) // ver, unused
	o.Args[16] = op
	binary.LittleEndian.PutUint32(o.Args[17:], gen)
	binary.LittleEndian.PutUint32(o.Args[21:], timeout)
}

// Watch returns the watch arguments.
func (o *OSDOp) Watch() (cookie uint64, op uint8, gen, timeout uint32) {
	return binary.LittleEndian.Uint64(o.Args[0:]), o.Args[16], binary.LittleEndian.Uint32(o.Args[17:]), binary.LittleEndian.Uint32(o.Args[21:])
}

// SetCookie fills the notify arguments (the notify's cookie).
func (o *OSDOp) SetCookie(cookie uint64) { binary.LittleEndian.PutUint64(o.Args[0:], cookie) }

// SetSnap fills the snap arguments (rollback).
func (o *OSDOp) SetSnap(snapID uint64) { binary.LittleEndian.PutUint64(o.Args[0:], snapID) }

// SetAssertVersion fills the assert_ver arguments.
func (o *OSDOp) SetAssertVersion(ver uint64) {
	binary.LittleEndian.PutUint64(o.Args[0:], 0)
	binary.LittleEndian.PutUint64(o.Args[8:], ver)
}

// SetAllocHint fills the alloc_hint arguments.
func (o *OSDOp) SetAllocHint(objectSize, writeSize uint64, flags uint32) {
	binary.LittleEndian.PutUint64(o.Args[0:], objectSize)
	binary.LittleEndian.PutUint64(o.Args[8:], writeSize)
	binary.LittleEndian.PutUint32(o.Args[16:], flags)
}
