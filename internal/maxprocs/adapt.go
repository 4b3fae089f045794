package maxprocs

import (
	"context"
	"log/slog"
	"math"
	"os"
	"runtime"
	"time"
)

// Config tunes Run; the zero value is the default.
type Config struct {
	// Max is the most Ps; default (0) the runtime's GOMAXPROCS when Run
	// starts, which follows the CPU limit of the process's cgroup.
	Max int
	// Interval is how often the load is sampled; default 250 ms.
	Interval time.Duration
	// Logger gets a debug record for each change; may be nil.
	Logger *slog.Logger
}

const (
	defaultInterval = 250 * time.Millisecond
	// growAt: the Ps were busy more than this share of the interval,
	// so the process may be short of them.
	growAt = 0.85
	// shrinkAt: the load would keep one P fewer busy less than this
	// share of the time...
	shrinkAt = 0.8
	// shrinkAfter: ... for this many intervals in a row.
	shrinkAfter = 4
)

// Run adapts GOMAXPROCS to the process's CPU use until ctx ends, then
// restores the value it found. It returns at once when the GOMAXPROCS
// environment variable is set or there is only one P to give.
func Run(ctx context.Context, cfg Config) {
	if os.Getenv("GOMAXPROCS") != "" {
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
	cur := min(start, cfg.Max)
	runtime.GOMAXPROCS(cur)
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	lastCPU, ok := processCPU()
	if !ok {
		return
	}
	lastWall := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c, _ := processCPU()
			used := (c - lastCPU).Seconds() / now.Sub(lastWall).Seconds()
			lastCPU, lastWall = c, now
			if n := s.next(cur, used); n != cur {
				runtime.GOMAXPROCS(n)
				if cfg.Logger != nil {
					cfg.Logger.Debug("maxprocs: GOMAXPROCS changed", "from", cur, "to", n, "cpus_used", math.Round(used*100)/100)
				}
				cur = n
			}
		}
	}
}

// sizer decides the P count from one interval's CPU use to the next.
type sizer struct {
	max int
	low int // intervals in a row in which one P fewer would have done
}

// next returns the P count to run with after an interval in which the
// process used `used` CPUs (CPU seconds per second) with cur Ps.
func (s *sizer) next(cur int, used float64) int {
	switch {
	case used > growAt*float64(cur) && cur < s.max:
		s.low = 0
		return min(s.max, 2*cur)
	case cur > 1 && used < shrinkAt*float64(cur-1):
		if s.low++; s.low >= shrinkAfter {
			s.low = 0
			return cur - 1
		}
	default:
		s.low = 0
	}
	return cur
}
