package maxprocs

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"time"
)

// Config tunes Run.
type Config struct {
	// Demand reports how many independent streams of work the process
	// serves now (an nbd.Server's Transmitting); required.
	Demand func() int
	// Max is the most Ps; default (0) the runtime's GOMAXPROCS when Run
	// starts, which follows the CPU limit of the process's cgroup.
	Max int
	// Interval is how often Demand is sampled; default 250 ms.
	Interval time.Duration
	// Logger gets a debug record for each change; may be nil.
	Logger *slog.Logger
}

const (
	defaultInterval = 250 * time.Millisecond
	// shrinkAfter is how many samples in a row must ask for fewer Ps
	// before there are fewer: connections come and go.
	shrinkAfter = 4
)

// Run sets GOMAXPROCS to the demand (at least one, at most Max) until
// ctx ends, then restores the value it found: at once when the demand
// grows, after shrinkAfter samples when it falls. It returns at once
// when the GOMAXPROCS environment variable is set or there is only one
// P to give.
func Run(ctx context.Context, cfg Config) {
	if os.Getenv("GOMAXPROCS") != "" || cfg.Demand == nil {
		return
	}
	start := runtime.GOMAXPROCS(0)
	if cfg.Max <= 0 {
		cfg.Max = start
	}
	if cfg.Interval <= 0 {
		cfg.Interval = defaultInterval
	}
	if cfg.Max <= 1 {
		return
	}
	defer runtime.GOMAXPROCS(start)
	s := &sizer{max: cfg.Max}
	cur := start
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		if n := s.next(cur, cfg.Demand()); n != cur {
			runtime.GOMAXPROCS(n)
			if cfg.Logger != nil {
				cfg.Logger.Debug("maxprocs: GOMAXPROCS changed", "from", cur, "to", n)
			}
			cur = n
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sizer decides the P count from one sample of the demand to the next.
type sizer struct {
	max int
	low int // samples in a row that asked for fewer Ps than there are
}

// next returns the P count to run with, given cur Ps and a demand.
func (s *sizer) next(cur, demand int) int {
	want := min(max(demand, 1), s.max)
	switch {
	case want > cur:
		s.low = 0
		return want
	case want < cur:
		if s.low++; s.low >= shrinkAfter {
			s.low = 0
			return want
		}
	default:
		s.low = 0
	}
	return cur
}
