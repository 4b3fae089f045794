package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"
)

// stallBound is the stall no restart may reach: the defaults that used
// to bound it (the kernel's 30 s request timeout, a dead client's 30 s
// watch) would show as stalls of about 30 s.
const stallBound = 15 * time.Second

// repeatedKills SIGKILLs the plugin r.kills times while the writers run
// (each time once every writer synced again since the last restart,
// plus a random delay so the kill lands at any point of a request), and
// starts it again at once, as a kubelet restarts a crashed container.
// For each writer it records the stall: from its last chunk synced
// before the kill to its first after. Nothing is checked for loss here:
// the writers go on, and the scenario verifies everything they wrote at
// the end.
func (r *rbdScenario) repeatedKills(ctx context.Context, held map[string]*heldWriter) error {
	names := make([]string, 0, len(held))
	for n := range held {
		names = append(names, n)
	}
	sort.Strings(names)
	stalls := map[string][]float64{}
	var restarts []float64
	for i := range r.kills {
		// One chunk each (the file systems' writers must not fill their
		// volumes over twenty rounds), then a random moment.
		for _, n := range names {
			if !held[n].w.WaitProgress(1, 2*time.Minute) {
				return fmt.Errorf("kill %d: %w", i+1, stuck(held[n].w, n, "not progressing"))
			}
		}
		time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
		before := map[string]time.Time{}
		base := map[string]int64{}
		for _, n := range names {
			before[n], base[n] = held[n].w.LastSync(), held[n].w.Synced()
		}
		killed := time.Now()
		r.p.kill()
		r.p = nil
		if err := r.startPlugin(ctx, fmt.Sprintf("plugin-k%d", i+1)); err != nil {
			return fmt.Errorf("kill %d: restart: %w", i+1, err)
		}
		restarts = append(restarts, time.Since(killed).Seconds())
		for _, n := range names {
			w := held[n].w
			deadline := killed.Add(2 * time.Minute)
			for w.Synced() <= base[n] {
				if time.Now().After(deadline) {
					return fmt.Errorf("kill %d: %w", i+1, stuck(w, n, "still blocked"))
				}
				time.Sleep(5 * time.Millisecond)
			}
			// the first chunk synced after the kill: its time is when
			// the writer resumed (or slightly later, by the poll)
			stalls[n] = append(stalls[n], w.LastSync().Sub(before[n]).Seconds())
		}
		var line []string
		for _, n := range names {
			line = append(line, fmt.Sprintf("%s %.2fs", n, stalls[n][i]))
		}
		fmt.Printf("### kill %d: plugin serving again after %.2fs; stalls %s\n", i+1, restarts[i], strings.Join(line, ", "))
	}
	var errs []error
	all := []float64{}
	for _, n := range names {
		s := stalls[n]
		all = append(all, s...)
		if mx := r.recordStalls("kills: "+n, n, s); mx >= stallBound.Seconds() {
			errs = append(errs, fmt.Errorf("the %s writer stalled %.1fs across a restart", n, mx))
		}
	}
	r.recordStalls("kills: all writers", "all writers", all)
	r.recordRestarts("kills: SIGKILL to plugin serving", restarts)
	r.Facts["kills"] = r.kills
	return errors.Join(errs...)
}

// recordStalls records the distribution of stalls under key (median,
// p99, max) and prints it for what; it returns the max.
func (r *rbdScenario) recordStalls(key, what string, stalls []float64) float64 {
	med, p99, mx := distribution(stalls)
	r.Timings[key+" stall median"] = med
	r.Timings[key+" stall p99"] = p99
	r.Timings[key+" stall max"] = mx
	fmt.Printf("### %s stalls over %d kills: median %.2fs, p99 %.2fs, max %.2fs\n", what, len(stalls), med, p99, mx)
	return mx
}

// recordRestarts records the median and max of restart times under key.
func (r *rbdScenario) recordRestarts(key string, restarts []float64) {
	med, _, mx := distribution(restarts)
	r.Timings[key+" median"] = med
	r.Timings[key+" max"] = mx
}

// distribution returns the median, the 99th percentile (nearest rank)
// and the maximum of s.
func distribution(s []float64) (median, p99, maximum float64) {
	if len(s) == 0 {
		return 0, 0, 0
	}
	v := slices.Clone(s)
	slices.Sort(v)
	rank := func(q float64) float64 {
		i := int(q*float64(len(v))+0.999999) - 1
		return v[min(max(i, 0), len(v)-1)]
	}
	return rank(0.5), rank(0.99), v[len(v)-1]
}
