package monc

import (
	"context"
	"errors"
	"fmt"

	"github.com/purerbd/purerbd/rados/msgr"
)

// Request sends m to the monitors over the client's session and waits
// for the answer: the message of type replyType whose tid is m's, as
// the monitors answer MPoolOp with MPoolOpReply. The client chooses the
// tid (m.Tid is ignored; m itself is not changed), so m's front must not
// depend on it. A request still unanswered when the session is lost is
// sent again on the next session, as commands are: the monitor may then
// see it twice. m's buffers must not change until Request returns.
//
// Messages the client consumes itself cannot be waited for: replyType
// must not be a MonMap, OSD map, auth reply, subscribe ack, config or
// version reply.
func (c *Client) Request(ctx context.Context, m *msgr.Message, replyType uint16) (*msgr.Message, error) {
	if consumed(replyType) {
		return nil, fmt.Errorf("monc: request type %d: replies of type %d are handled by the client itself", m.Type, replyType)
	}
	if m.Type == 0 {
		return nil, errors.New("monc: request without a message type")
	}
	front := m.Front
	rep, err := c.roundTrip(ctx, *m, replyType, func(uint64) []byte { return front })
	if err != nil {
		return nil, fmt.Errorf("monc: request type %d: %w", m.Type, err)
	}
	return rep, nil
}

// consumed reports whether the session loop handles messages of type t
// itself, never handing them to a waiting request.
func consumed(t uint16) bool {
	switch t {
	case msgMonMap, MsgOSDMap, msgMonGetVersionReply, msgAuthReply, msgMonSubscribeAck, msgConfig:
		return true
	}
	return false
}
