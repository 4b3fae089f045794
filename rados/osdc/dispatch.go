package osdc

import (
	"sync/atomic"

	"github.com/purerbd/purerbd/rados/msgr"
)

// dispatch routes one connection's messages. Replies to requests are
// handled on the connection's reader goroutine (msgr.Config.Intercept),
// which wakes the request's caller directly instead of through the
// session's goroutine. Every other message (maps, backoffs, watch
// events) goes on Incoming to the session's goroutine, whose handling
// may close connections (Close waits for the reader).
//
// Messages are handled in the order received: a reply is taken on the
// reader only while nothing queued before it is still unhandled. Only
// the reader adds to queued, so once it reads zero, the session has
// finished every earlier message.
type dispatch struct {
	s      *session
	queued atomic.Int64 // messages on Incoming not yet handled
}

// intercept is the connection's msgr.Config.Intercept.
func (d *dispatch) intercept(m *msgr.Message) bool {
	if m.Type == MsgOSDOpReply && d.queued.Load() == 0 {
		if r, err := DecodeOSDOpReply(m); err == nil {
			d.s.o.handleReply(d.s, r)
			return true
		}
		// the session's goroutine decodes it again, reports the error
		// and drops the connection
	}
	d.queued.Add(1)
	return false
}

// handled counts off a message from Incoming once it has been handled.
func (d *dispatch) handled() { d.queued.Add(-1) }
