package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"
)

// Case is one comparison: the same workload run by every contender.
type Case struct {
	Name string // "4k randread QD32"
	Unit string // "IOPS" or "MiB/s"
	// Series and X place the case on a plot of Series against X (for
	// example "4k randread" at queue depth 32); an empty Series keeps it
	// off the line plots.
	Series string
	X      float64
	// Params is what the contenders' runners need to know (block size,
	// queue depth, pattern...); see the section's code.
	Params  map[string]string
	Samples map[string][]Sample // by contender
	Errors  []string            // failed runs, "contender: error"
}

// values returns the headline values of contender's samples.
func (c *Case) values(contender string, f func(Sample) float64) []float64 {
	var v []float64
	for _, s := range c.Samples[contender] {
		v = append(v, f(s))
	}
	return v
}

// caseNamed is sec's case called name, or nil.
func caseNamed(sec *Section, name string) *Case {
	if sec == nil {
		return nil
	}
	for _, c := range sec.Cases {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// spread of the headline values of one contender.
func (c *Case) spread(contender string) Spread {
	return spreadOf(c.values(contender, func(s Sample) float64 { return s.Value }))
}

// Ratio is the median of contender a over the median of contender b.
func (c *Case) Ratio(a, b string) float64 {
	return ratio(c.spread(a).Median, c.spread(b).Median)
}

// maxRSS is the largest peak RSS seen for contender (0 when unknown).
func (c *Case) maxRSS(contender string) int64 {
	var m int64
	for _, s := range c.Samples[contender] {
		m = max(m, s.RSS)
	}
	return m
}

// medianLat is the median over runs of the latency at percentile p.
func (c *Case) medianLat(contender string, p float64) float64 {
	return spreadOf(c.values(contender, func(s Sample) float64 { return s.Lat.At(p) })).Median
}

// Section is one group of comparisons between purerbd and one peer.
type Section struct {
	ID    string // file-name prefix of its plots: "nbd-memory"
	Title string
	Short string // a few words naming it in plots and the summary
	// Method is Markdown describing the setup, the clients and what is
	// measured.
	Method string
	// Contenders are the names in the tables; the first is purerbd's.
	Contenders []string
	// CPUOf says whose CPU and RSS the figures are (server or client).
	CPUOf string
	// LatOf says where the latencies come from.
	LatOf string
	// Cluster names the cluster the section ran on ("pacific tuned"; ""
	// without one).
	Cluster string
	// OSDOf, when set, says how the OSD's CPU per client op was taken
	// (every sample's OSDCPU); empty for sections without a cluster.
	OSDOf string
	// GuestOf, when set, says how the whole guest's CPU and context
	// switches per op were taken (every sample's GuestCPU and
	// Switches); set by the kernel-path sections only.
	GuestOf string
	// HostOf, when set, says how the host's CPU around each run was
	// taken (every sample's Host fields); set by the kernel-path
	// sections whose runs the host watched.
	HostOf string
	Cases  []*Case
	Notes  []string // Markdown lines added under the tables

	// Base is ID without the cluster kind's suffix (set only when the
	// run has several kinds): the ID the headline's rows name.
	Base string
	// osd returns the cluster's OSDs' CPU seconds so far, read around
	// every run when set.
	osd func() (float64, error)

	LoadStart, LoadEnd string // /proc/loadavg around the section
	Elapsed            time.Duration
	Skipped            string // why the section did not run
}

// baseID is the section's ID without its cluster kind's suffix.
func (s *Section) baseID() string {
	if s.Base != "" {
		return s.Base
	}
	return s.ID
}

// runTimeout bounds one run of one contender (a child process is killed
// when it is reached): a cluster that stops serving must cost one failed
// run, not the whole suite.
const runTimeout = 2 * time.Minute

// runner runs one contender on one case once.
type runner func(ctx context.Context, contender string, c *Case) (Sample, error)

// interleave runs every case reps times, each repetition alternating the
// contenders, so that a drift in the machine's load hits both. Who goes
// first alternates too (A B, B A, B A, A B ... over the repetitions, and
// flipped from one case to the next: runOrder): an OSD still settling
// after an image was filled, or a load that eases, would otherwise favour
// whoever always runs second. With
// an even reps (Config rounds it up) each of two contenders goes first
// in half the repetitions: on an untuned memstore, where a run costs
// the OSD more or less by what the run before it left in the objects,
// the one that went first once more had its median taken from the
// other half of the runs (see bench/findings.md). A
// failed run is recorded on the case and the suite carries on; a
// cancelled context ends the section with a note. The section records
// the load average before and after and how long it took.
func (s *Section) interleave(ctx context.Context, log *slog.Logger, reps int, run runner) {
	t0 := time.Now()
	s.LoadStart = loadavg()
	defer func() { s.LoadEnd, s.Elapsed = loadavg(), time.Since(t0) }()
	for rep := 1; rep <= reps; rep++ {
		for i, c := range s.Cases {
			for _, who := range runOrder(s.Contenders, rep, i) {
				if err := ctx.Err(); err != nil {
					s.Notes = append(s.Notes, "interrupted: "+err.Error())
					return
				}
				rctx, cancel := context.WithTimeout(ctx, runTimeout)
				smp, err := s.measure(log, func() (Sample, error) { return run(rctx, who, c) })
				cancel()
				if err != nil {
					log.Warn("run failed", "section", s.ID, "case", c.Name, "contender", who, "err", err)
					c.Errors = append(c.Errors, fmt.Sprintf("%s (rep %d): %v", who, rep, err))
					continue
				}
				s.record(log, c, who, rep, smp)
			}
		}
	}
}

// measure does one run and, when the section watches the cluster's OSDs,
// sets the sample's OSDCPU to what they spent during it (NaN when it
// cannot be read: the run itself still counts).
func (s *Section) measure(log *slog.Logger, run func() (Sample, error)) (Sample, error) {
	if s.osd == nil {
		return run()
	}
	before, errB := s.osd()
	smp, err := run()
	after, errA := s.osd()
	smp.OSDCPU = math.NaN()
	if e := errors.Join(errB, errA); e != nil {
		log.Warn("bench: OSD CPU not read", "section", s.ID, "err", e)
	} else {
		smp.OSDCPU = after - before
	}
	return smp, err
}

// runOrder is the contenders in order for repetition rep (from 1) of
// the i-th case (from 0). Over the repetitions of a case, who goes first
// follows A B B A, A B B A ... rather than A B A B: each pair of
// repetitions still has each contender first once (so an even number of
// repetitions is balanced), and a cluster that settles over a section,
// each run cheaper than the one before, no longer always has the same
// contender first in the earlier repetition of every pair (the untuned
// memstore's 4M writes in bench/findings.md). From one case to the next
// the order flips, so that consecutive runs alternate as before.
func runOrder(contenders []string, rep, i int) []string {
	if (rep/2+i)%2 == 0 {
		return contenders
	}
	r := slices.Clone(contenders)
	slices.Reverse(r)
	return r
}

// record adds one run's sample to a case.
func (s *Section) record(log *slog.Logger, c *Case, who string, rep int, smp Sample) {
	if c.Samples == nil {
		c.Samples = map[string][]Sample{}
	}
	c.Samples[who] = append(c.Samples[who], smp)
	args := []any{"section", s.ID, "case", c.Name, "contender", who, "rep", rep,
		c.Unit, math.Round(smp.Value*10) / 10, "cpu_s", math.Round(smp.CPU*100) / 100}
	if s.OSDOf != "" {
		args = append(args, "osd_cpu_s", math.Round(smp.OSDCPU*100)/100)
	}
	log.Info("run", args...)
}

// newCase builds a case with its parameters given as key, value pairs.
func newCase(name, unit, series string, x float64, kv ...string) *Case {
	p := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i]] = kv[i+1]
	}
	return &Case{Name: name, Unit: unit, Series: series, X: x, Params: p}
}
