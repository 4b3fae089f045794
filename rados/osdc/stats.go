package osdc

import (
	"sync/atomic"

	"github.com/purerbd/purerbd/rados/msgr"
)

// Stats counts what the objecter did since it started, for monitoring
// and for tests that check a fault was really handled.
type Stats struct {
	Requests      uint64 // requests submitted
	Sends         uint64 // messages sent for them (first sends and resends)
	Resends       uint64 // sends after the first: placement changes, resets, EAGAIN, backoffs lifted
	Redirects     uint64 // replies that redirected a request
	EAGAIN        uint64 // replies asking to try again
	Backoffs      uint64 // backoffs (MOSDBackoff block) received
	SessionResets uint64 // OSD sessions lost while open
	Maps          uint64 // OSD maps installed
	Reconnects    uint64 // watches re-registered
	Sessions      int    // OSD sessions open now
	// Written counts what the OSD sessions wrote: every message (ops,
	// and the acks and pings of backoffs and watches), and the socket
	// writes that carried them, several messages in one when requests
	// are sent together.
	Written msgr.WriteCounts
}

type counters struct {
	requests, sends, resends, redirects, eagain, backoffs, resets, maps, reconnects atomic.Uint64
	written                                                                         msgr.Counters // shared by the OSD sessions' connections
}

// Stats returns the objecter's counters.
func (o *Objecter) Stats() Stats {
	c := &o.stats
	return Stats{
		Requests: c.requests.Load(), Sends: c.sends.Load(), Resends: c.resends.Load(),
		Redirects: c.redirects.Load(), EAGAIN: c.eagain.Load(), Backoffs: c.backoffs.Load(),
		SessionResets: c.resets.Load(), Maps: c.maps.Load(), Reconnects: c.reconnects.Load(),
		Sessions: o.sessionCount(), Written: c.written.Load(),
	}
}

// sessionCount returns how many OSD sessions are open.
func (o *Objecter) sessionCount() int {
	if v := o.sessView.Load(); v != nil {
		return len(*v)
	}
	return 0
}
