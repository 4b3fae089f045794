package osdc

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

// MOSDBackoff asks a client to hold back requests for a range of objects
// of a placement group (CEPH_MSG_OSD_BACKOFF, v1): BLOCK starts a backoff
// (the client answers ACK_BLOCK), UNBLOCK ends it. The range is [Begin,
// End), or the single object Begin when they are equal.
type MOSDBackoff struct {
	PGID     denc.SPG
	Epoch    uint32
	Op       uint8 // Backoff*
	ID       uint64
	Begin    HObject
	End      HObject
	Priority uint16 // for sending: the priority of the client's ops
}

// DecodeOSDBackoff decodes an MOSDBackoff.
func DecodeOSDBackoff(msg *msgr.Message) (*MOSDBackoff, error) {
	if msg.Type != MsgOSDBackoff {
		return nil, fmt.Errorf("osdc: message type %d is not MOSDBackoff", msg.Type)
	}
	b := &MOSDBackoff{}
	d := denc.NewDecoder(msg.Front)
	b.PGID.Decode(d)
	b.Epoch = d.U32("MOSDBackoff epoch")
	b.Op = d.U8("MOSDBackoff op")
	b.ID = d.U64("MOSDBackoff id")
	b.Begin.Decode(d)
	b.End.Decode(d)
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("osdc: MOSDBackoff: %w", err)
	}
	return b, nil
}

// Message encodes b.
func (b *MOSDBackoff) Message() *msgr.Message {
	e := denc.NewEncoder(nil)
	b.PGID.Encode(e)
	e.U32(b.Epoch)
	e.U8(b.Op)
	e.U64(b.ID)
	b.Begin.Encode(e)
	b.End.Encode(e)
	return &msgr.Message{Type: MsgOSDBackoff, Version: 1, CompatVersion: 1, Priority: b.Priority, Front: e.Bytes()}
}

// covers reports whether the backoff's range holds back h.
func (b *MOSDBackoff) covers(h HObject) bool {
	c := h.Compare(b.Begin)
	if c == 0 {
		return true
	}
	return c > 0 && h.Compare(b.End) < 0
}
