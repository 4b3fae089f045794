package ublk

import "sync/atomic"

// Stats counts what a device's queues served and the calls into the
// kernel that carried it: requests per fetch completion, per wake-up and
// per commit say how well the queues batch, which is what a request's
// CPU cost depends on at depth.
type Stats struct {
	// Requests is the number of requests handed to the backend.
	Requests uint64
	// Fetches is the number of fetch completions that carried requests:
	// one per request without batch I/O, one per batch of tags with it.
	Fetches uint64
	// Wakeups is the number of times a queue's waiter woke and found
	// requests to start.
	Wakeups uint64
	// Commits is the number of calls into the kernel that committed
	// results (a submission of COMMIT_AND_FETCH_REQ commands, or a
	// COMMIT_IO_CMDS).
	Commits uint64
}

// queueStats are a queue's counters, updated as it serves.
type queueStats struct {
	requests, fetches, wakeups, commits atomic.Uint64
}

// add adds the queue's counters to s.
func (q *queueStats) add(s *Stats) {
	s.Requests += q.requests.Load()
	s.Fetches += q.fetches.Load()
	s.Wakeups += q.wakeups.Load()
	s.Commits += q.commits.Load()
}

// Stats returns what the device's queues have served so far, summed
// over them, while the device runs.
func (d *Device) Stats() Stats {
	var s Stats
	for _, q := range d.queues {
		q.stats.add(&s)
	}
	return s
}
