package msgr

import (
	"encoding/binary"
	"fmt"
)

// PriorityDefault is CEPH_MSG_PRIO_DEFAULT, used when Message.Priority is
// zero.
const PriorityDefault = 127

// header2Len is the size of ceph_msg_header2, the control segment of a
// MESSAGE frame.
const header2Len = 41

// Message is one Ceph message: a type, versions for its encoding, and up
// to three payload parts. What the parts hold is up to the message type
// (most put everything in Front; OSD ops put object data in Data).
//
// A Message passed to Send belongs to the Conn until Send returns; a
// received Message belongs to its receiver. Front, Middle and Data of a
// received message may share one allocation but never overlap.
type Message struct {
	Type          uint16
	Priority      uint16 // zero means PriorityDefault
	Version       uint16 // HEAD_VERSION of the encoding in Front
	CompatVersion uint16 // COMPAT_VERSION
	Tid           uint64 // transaction id, chosen by the sender's layer
	// DataOff is the sender's hint of where Data belongs in the object
	// (ceph_msg_header data_off); OSD writes set it to the offset.
	DataOff uint16
	// Seq is the message's sequence number on its connection: set by
	// Send, and on receipt.
	Seq uint64

	Front, Middle, Data []byte

	// DataCRC, when DataCRCKnown is set, is crc32c.Checksum(Data), which
	// the sender already has (a rados.Frozen's cached sum): Send puts it
	// on the frame in crc mode rather than computing it. A wrong one
	// makes the peer drop the connection.
	DataCRC      uint32
	DataCRCKnown bool

	// SpliceData lets the connection hand a large Data to the kernel by
	// reference rather than copy it into the socket (Linux, TCP, crc
	// mode): the kernel then reads Data's memory after Send returned,
	// until the peer has read it. Set it only when Data stays allocated
	// and unchanged until the peer has answered the message, as an OSD
	// request's data does until its reply. Data changed sooner reaches
	// the peer with a crc that no longer matches, and the peer drops the
	// connection.
	SpliceData bool

	// Alone says that the sender expects no other message on the
	// connection soon (an OSD request with no other in flight): Send
	// then writes m from the calling goroutine when the writer is idle,
	// which saves two hand-offs between goroutines. Without it Send
	// always hands m to the writer goroutine, which writes messages that
	// come close together in one batch.
	Alone bool
}

// String summarises m for logs (no payload).
func (m *Message) String() string {
	return fmt.Sprintf("msg(type %d v%d/%d tid %d seq %d, %d+%d+%d bytes)",
		m.Type, m.Version, m.CompatVersion, m.Tid, m.Seq, len(m.Front), len(m.Middle), len(m.Data))
}

// encodeHeader2 writes ceph_msg_header2 for m into p[:header2Len]:
// seq, tid, type, priority, version, data_pre_padding_len, data_off,
// ack_seq, flags, compat_version, reserved.
func encodeHeader2(p []byte, m *Message, seq, ackSeq uint64) {
	le := binary.LittleEndian
	prio := m.Priority
	if prio == 0 {
		prio = PriorityDefault
	}
	le.PutUint64(p[0:], seq)
	le.PutUint64(p[8:], m.Tid)
	le.PutUint16(p[16:], m.Type)
	le.PutUint16(p[18:], prio)
	le.PutUint16(p[20:], m.Version)
	le.PutUint32(p[22:], 0)
	le.PutUint16(p[26:], m.DataOff)
	le.PutUint64(p[28:], ackSeq)
	p[36] = 0
	le.PutUint16(p[37:], m.CompatVersion)
	le.PutUint16(p[39:], 0)
}

// decodeHeader2 parses a MESSAGE frame's control segment and returns the
// message (without payload) and the peer's ack_seq.
func decodeHeader2(p []byte) (*Message, uint64, error) {
	if len(p) < header2Len {
		return nil, 0, fmt.Errorf("%w: message header of %d bytes, want %d", ErrProtocol, len(p), header2Len)
	}
	le := binary.LittleEndian
	m := &Message{
		Seq:           le.Uint64(p[0:]),
		Tid:           le.Uint64(p[8:]),
		Type:          le.Uint16(p[16:]),
		Priority:      le.Uint16(p[18:]),
		Version:       le.Uint16(p[20:]),
		DataOff:       le.Uint16(p[26:]),
		CompatVersion: le.Uint16(p[37:]),
	}
	return m, le.Uint64(p[28:]), nil
}
