package genl

import (
	"encoding/binary"
	"fmt"
	"syscall"
)

// Netlink message header layout (struct nlmsghdr) and the generic netlink
// header after it (struct genlmsghdr).
const (
	headerLen     = 16
	genlHeaderLen = 4
)

// Message types and flags used here (include/uapi/linux/netlink.h).
const (
	typeNoop  = 0x1 // NLMSG_NOOP
	typeError = 0x2 // NLMSG_ERROR: an error or, with error 0, an ACK
	typeDone  = 0x3 // NLMSG_DONE

	FlagRequest = 0x1   // NLM_F_REQUEST
	FlagMulti   = 0x2   // NLM_F_MULTI
	FlagAck     = 0x4   // NLM_F_ACK
	FlagDump    = 0x300 // NLM_F_DUMP (ROOT|MATCH)

	flagCapped  = 0x100 // NLM_F_CAPPED: the error does not echo the payload
	flagAckTLVs = 0x200 // NLM_F_ACK_TLVS: extended-ACK attributes follow
)

// Extended ACK attributes (enum nlmsgerr_attrs).
const (
	errAttrMsg      = 1
	errAttrOffset   = 2
	errAttrMissType = 5
)

// Header is a decoded struct nlmsghdr.
type Header struct {
	Length uint32
	Type   uint16
	Flags  uint16
	Seq    uint32
	PortID uint32
}

// Message is one netlink message: its header and the bytes after it. The
// payload is a copy, independent of the receive buffer.
type Message struct {
	Header  Header
	Payload []byte
}

// ParseMessages splits one received datagram into its messages, copying
// each payload out of b.
func ParseMessages(b []byte) ([]Message, error) {
	var msgs []Message
	for off := 0; off < len(b); {
		if len(b)-off < headerLen {
			return nil, fmt.Errorf("genl: %d bytes left at offset %d, short of a message header", len(b)-off, off)
		}
		h := Header{
			Length: binary.LittleEndian.Uint32(b[off:]),
			Type:   binary.LittleEndian.Uint16(b[off+4:]),
			Flags:  binary.LittleEndian.Uint16(b[off+6:]),
			Seq:    binary.LittleEndian.Uint32(b[off+8:]),
			PortID: binary.LittleEndian.Uint32(b[off+12:]),
		}
		if h.Length < headerLen || uint64(h.Length) > uint64(len(b)-off) {
			return nil, fmt.Errorf("genl: message at offset %d has length %d, %d bytes left", off, h.Length, len(b)-off)
		}
		end := off + int(h.Length)
		msgs = append(msgs, Message{Header: h, Payload: append([]byte(nil), b[off+headerLen:end]...)})
		off += min(align4(int(h.Length)), len(b)-off)
	}
	return msgs, nil
}

// GenlMessage is a generic netlink message: a command, the family's
// version and the attributes.
type GenlMessage struct {
	Cmd     uint8
	Version uint8
	Attrs   []byte
}

// Genl decodes m's payload as a generic netlink message.
func (m Message) Genl() (GenlMessage, error) {
	if len(m.Payload) < genlHeaderLen {
		return GenlMessage{}, fmt.Errorf("genl: message type %d has a %d-byte payload, short of the genl header", m.Header.Type, len(m.Payload))
	}
	return GenlMessage{Cmd: m.Payload[0], Version: m.Payload[1], Attrs: m.Payload[genlHeaderLen:]}, nil
}

// encodeRequest builds a generic netlink request message.
func encodeRequest(family uint16, flags uint16, seq uint32, cmd, version uint8, attrs []byte) ([]byte, error) {
	n := headerLen + genlHeaderLen + len(attrs)
	if n > 1<<31 {
		return nil, fmt.Errorf("genl: request of %d bytes is too large", n)
	}
	b := make([]byte, 0, n)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint16(b, family)
	b = binary.LittleEndian.AppendUint16(b, flags)
	b = binary.LittleEndian.AppendUint32(b, seq)
	b = binary.LittleEndian.AppendUint32(b, 0) // port: the kernel fills it in
	b = append(b, cmd, version, 0, 0)
	return append(b, attrs...), nil
}

// Error is a negative acknowledgement from the kernel. It unwraps to its
// errno, so errors.Is(err, syscall.EBUSY) works.
type Error struct {
	Errno syscall.Errno
	// Message is the extended-ACK message, when the kernel gave one.
	Message string
	// Offset is the offset in the request of the attribute at fault, when
	// the kernel named one (HasOffset).
	Offset    uint32
	HasOffset bool
	// MissingType is the type of a required attribute that was absent,
	// when the kernel said so (0 otherwise).
	MissingType uint32
}

func (e *Error) Error() string {
	s := "netlink: " + e.Errno.Error()
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.HasOffset {
		s += fmt.Sprintf(" (attribute at offset %d)", e.Offset)
	}
	if e.MissingType != 0 {
		s += fmt.Sprintf(" (missing attribute %d)", e.MissingType)
	}
	return s
}

func (e *Error) Unwrap() error { return e.Errno }

// ParseAck decodes an NLMSG_ERROR message: nil for an acknowledgement
// (error 0), an *Error for a failure, and another error when the message
// is malformed.
func ParseAck(m Message) error {
	if m.Header.Type != typeError {
		return fmt.Errorf("genl: message type %d is not an acknowledgement", m.Header.Type)
	}
	p := m.Payload
	if len(p) < 4+headerLen {
		return fmt.Errorf("genl: acknowledgement of %d bytes, short of errno and echoed header", len(p))
	}
	code := int32(binary.LittleEndian.Uint32(p))
	if code > 0 {
		return fmt.Errorf("genl: acknowledgement with positive error %d", code)
	}
	if code == 0 {
		return nil
	}
	e := &Error{Errno: syscall.Errno(-int64(code))}
	rest := p[4+headerLen:]
	if m.Header.Flags&flagCapped == 0 {
		// The kernel echoed our whole request after its header.
		echoed := int(binary.LittleEndian.Uint32(p[4:]))
		if echoed < headerLen || echoed-headerLen > len(rest) {
			return fmt.Errorf("genl: acknowledgement echoes a %d-byte request in %d bytes", echoed, len(rest)+headerLen)
		}
		rest = rest[min(align4(echoed-headerLen), len(rest)):]
	}
	if m.Header.Flags&flagAckTLVs != 0 {
		attrs, err := ParseAttrs(rest)
		if err != nil {
			return fmt.Errorf("genl: extended acknowledgement: %w", err)
		}
		for _, a := range attrs {
			switch a.Type {
			case errAttrMsg:
				e.Message = a.String()
			case errAttrOffset:
				if v, err := a.Uint32(); err == nil {
					e.Offset, e.HasOffset = v, true
				}
			case errAttrMissType:
				if v, err := a.Uint32(); err == nil {
					e.MissingType = v
				}
			}
		}
	}
	return e
}
