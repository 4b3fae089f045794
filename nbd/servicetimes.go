package nbd

import (
	"sync/atomic"
	"time"
)

// ServiceTimes measures how long a server takes to serve requests, per
// window of time, cheaply enough to run on every request: two clock
// reads and three atomic operations. An adaptive request timeout (package
// nbd/kernel) lowers itself only on this evidence that requests are fast.
//
// A request is timed from the moment its header is read to the moment
// its reply is handed to the writer. Requests that never end (a stalled
// backend) are caught too: Roll reports whether one that started before
// the previous Roll is still being served.
//
// Set Config.ServiceTimes to have a Server feed one; it is safe for
// concurrent use.
type ServiceTimes struct {
	base time.Time
	gen  atomic.Uint64
	// open counts the requests being served by the parity of the window
	// they started in.
	open    [2]atomic.Int64
	longest atomic.Int64 // nanoseconds, this window
}

// NewServiceTimes returns a ServiceTimes at the start of its first window.
func NewServiceTimes() *ServiceTimes { return &ServiceTimes{base: time.Now()} }

// serviceStart is what a request remembers of when it started.
type serviceStart struct {
	at  time.Duration // since base (monotonic)
	gen uint64
}

// start records the start of a request.
func (s *ServiceTimes) start() serviceStart {
	g := s.gen.Load()
	s.open[g&1].Add(1)
	return serviceStart{at: time.Since(s.base), gen: g}
}

// done records the end of a request that start began.
func (s *ServiceTimes) done(st serviceStart) {
	s.open[st.gen&1].Add(-1)
	d := int64(time.Since(s.base) - st.at)
	for {
		cur := s.longest.Load()
		if d <= cur || s.longest.CompareAndSwap(cur, d) {
			return
		}
	}
}

// ServiceWindow is what one window of a ServiceTimes saw.
type ServiceWindow struct {
	// Longest is the longest service time among the requests that ended
	// in the window.
	Longest time.Duration
	// Lingering reports that a request that started before the window
	// began was still being served when it ended: it has taken at least
	// a whole window so far. Half of such requests (those of every other
	// window) are reported only a window later, so two windows in a row
	// without Lingering mean that no request has been served for longer
	// than two windows.
	Lingering bool
}

// Roll ends the current window and starts the next; it returns what the
// window that ended saw. Call it from one goroutine at a time.
func (s *ServiceTimes) Roll() ServiceWindow {
	g := s.gen.Add(1) // requests from now on count in the other parity
	// The parity now beginning holds the requests of the window before
	// the one that ended (and older ones of that parity) that are still
	// open, plus any that started since the line above: a harmless
	// over-report.
	lingering := s.open[g&1].Load() > 0
	return ServiceWindow{Longest: time.Duration(s.longest.Swap(0)), Lingering: lingering}
}
