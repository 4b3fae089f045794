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
		mark, err := markWriters(held, names)
		if err != nil {
			return fmt.Errorf("kill %d: %w", i+1, err)
		}
		time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
		mark.take(held)
		r.p.kill()
		r.p = nil
		exited := time.Since(mark.at).Seconds()
		if err := r.startPlugin(ctx, fmt.Sprintf("plugin-k%d", i+1)); err != nil {
			return fmt.Errorf("kill %d: restart: %w", i+1, err)
		}
		restarts = append(restarts, time.Since(mark.at).Seconds())
		got, err := mark.stalls(held)
		if err != nil {
			return fmt.Errorf("kill %d: %w", i+1, err)
		}
		var line []string
		for _, n := range names {
			stalls[n] = append(stalls[n], got[n])
			line = append(line, fmt.Sprintf("%s %.2fs", n, got[n]))
		}
		fmt.Printf("### kill %d at %s: plugin gone after %.2fs, serving again after %.2fs; stalls %s\n", i+1,
			mark.at.UTC().Format("15:04:05.000"), exited, restarts[i], strings.Join(line, ", "))
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

// writerMark is where each writer was when the plugin was stopped.
type writerMark struct {
	names  []string
	at     time.Time            // when the plugin was stopped
	before map[string]time.Time // each writer's last chunk synced before
	base   map[string]int64     // and its count
}

// markWriters waits until every writer synced a chunk more; take then
// notes where they are, right before the plugin is stopped.
func markWriters(held map[string]*heldWriter, names []string) (*writerMark, error) {
	for _, n := range names {
		if !held[n].w.WaitProgress(1, 2*time.Minute) {
			return nil, stuck(held[n].w, n, "not progressing")
		}
	}
	return &writerMark{names: names, before: map[string]time.Time{}, base: map[string]int64{}}, nil
}

func (m *writerMark) take(held map[string]*heldWriter) {
	for _, n := range m.names {
		m.before[n], m.base[n] = held[n].w.LastSync(), held[n].w.Synced()
	}
	m.at = time.Now()
}

// stalls waits until every writer synced a chunk after the mark and
// returns each one's stall: from its last chunk synced before the stop
// to its first after.
func (m *writerMark) stalls(held map[string]*heldWriter) (map[string]float64, error) {
	out := map[string]float64{}
	for _, n := range m.names {
		w := held[n].w
		deadline := m.at.Add(2 * time.Minute)
		for w.Synced() <= m.base[n] {
			if time.Now().After(deadline) {
				return nil, stuck(w, n, "still blocked")
			}
			time.Sleep(5 * time.Millisecond)
		}
		// the first chunk synced after the stop: its time is when the
		// writer resumed (or slightly later, by the poll)
		out[n] = w.LastSync().Sub(m.before[n]).Seconds()
	}
	return out, nil
}

// gracefulRestart stops the plugin with SIGTERM, as a rollout does (it
// hands the devices over: the NBD connections released once idle, the
// ublk devices left to the kernel), starts it again at once and checks
// that every writer resumes, reporting each one's stall.
func (r *rbdScenario) gracefulRestart(ctx context.Context, held map[string]*heldWriter) error {
	names := make([]string, 0, len(held))
	for n := range held {
		names = append(names, n)
	}
	sort.Strings(names)
	mark, err := markWriters(held, names)
	if err != nil {
		return err
	}
	mark.take(held)
	if err := r.p.terminate(time.Minute); err != nil {
		return fmt.Errorf("SIGTERM: %w", err)
	}
	r.p = nil
	exited := time.Since(mark.at).Seconds()
	if err := r.startPlugin(ctx, "plugin-term"); err != nil {
		return fmt.Errorf("restart after SIGTERM: %w", err)
	}
	got, err := mark.stalls(held)
	if err != nil {
		return err
	}
	var errs []error
	var line []string
	for _, n := range names {
		r.Timings["sigterm: "+n+" stall"] = got[n]
		line = append(line, fmt.Sprintf("%s %.2fs", n, got[n]))
		if got[n] >= stallBound.Seconds() {
			errs = append(errs, fmt.Errorf("the %s writer stalled %.1fs across an orderly restart", n, got[n]))
		}
	}
	r.Timings["sigterm: SIGTERM to exit"] = exited
	fmt.Printf("### SIGTERM: plugin exited after %.2fs; stalls %s\n", exited, strings.Join(line, ", "))
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
