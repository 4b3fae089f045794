package kernel

import (
	"time"

	"github.com/purerbd/purerbd/nbd"
)

// timeoutPolicy decides the request timeout of a device whose timeout
// adapts (AttachConfig.MinTimeout): short while requests are fast, so
// that a request in flight when the server dies is resent soon after a
// successor reattaches, and longer while requests are slow, so that a
// slow cluster does not have every request resent over and over.
//
// It goes up on drops: each time the kernel drops a connection (a request
// outlived the timeout) it doubles, up to the ceiling. The kernel keeps
// the timeout a request started with across its resends, so only
// requests started after a raise have the new one; a drop earlier than
// the new timeout after a raise comes from an older request and is no
// reason to raise again.
//
// It comes down on evidence: it halves, down to the floor, after calm
// windows in a row, calm meaning that the longest request served in the
// window took under a quarter of the timeout and none was left over from
// an earlier window. The calm windows must span the timeout at least:
// requests started under it must have had the time to outlive it. How
// many calm windows it takes beyond that doubles each time a
// drop follows a lowering within that many windows (the lowering was
// premature: latencies swing), and halves again after long calm.
//
// All durations are whole seconds, as the kernel takes them.
type timeoutPolicy struct {
	min, max time.Duration
	window   time.Duration // how often onWindow is called

	cur       time.Duration
	lastRaise time.Time // zero: never
	lastLower time.Time // zero: never
	calm      int       // calm windows in a row
	need      int       // calm windows needed to lower
}

// Bounds of timeoutPolicy.need.
const (
	minCalmWindows = 2
	maxCalmWindows = 16
)

// newTimeoutPolicy starts at the floor. min and max are rounded up to
// whole seconds; max is at least min.
func newTimeoutPolicy(minT, maxT, window time.Duration) *timeoutPolicy {
	minT, maxT = wholeSeconds(minT), wholeSeconds(maxT)
	maxT = max(maxT, minT)
	return &timeoutPolicy{min: minT, max: maxT, window: window, cur: minT, need: minCalmWindows}
}

func wholeSeconds(d time.Duration) time.Duration {
	return time.Duration(seconds(d)) * time.Second
}

// timeout is the current timeout.
func (p *timeoutPolicy) timeout() time.Duration { return p.cur }

// onDrop handles a connection the kernel dropped at now; it returns the
// new timeout when it changed.
func (p *timeoutPolicy) onDrop(now time.Time) (time.Duration, bool) {
	p.calm = 0
	if !p.lastLower.IsZero() && now.Sub(p.lastLower) < time.Duration(p.need)*p.window {
		p.need = min(2*p.need, maxCalmWindows)
	}
	if !p.lastRaise.IsZero() && now.Sub(p.lastRaise) < p.cur {
		return p.cur, false // a request from before the last raise
	}
	if p.cur >= p.max {
		return p.cur, false
	}
	p.cur = min(2*p.cur, p.max)
	p.lastRaise = now
	return p.cur, true
}

// onWindow handles the end of a window of service times at now; it
// returns the new timeout when it changed.
func (p *timeoutPolicy) onWindow(now time.Time, w nbd.ServiceWindow) (time.Duration, bool) {
	if w.Lingering || w.Longest >= p.cur/4 {
		p.calm = 0
		return p.cur, false
	}
	p.calm++
	if p.calm >= 4*p.need && p.need > minCalmWindows {
		p.need /= 2
		p.calm = 0
	}
	if p.cur <= p.min || p.calm < p.need || time.Duration(p.calm)*p.window < p.cur {
		return p.cur, false
	}
	p.cur = max(wholeSeconds(p.cur/2), p.min)
	p.lastLower = now
	p.calm = 0
	return p.cur, true
}
