package bench

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"
)

// radosBench compares `purerbd rados bench` with `rados bench` (librados)
// on the same pool: whole-object writes, then random reads of the objects
// just written, at 4 KiB with 32 in flight and 4 MiB with 16. Each
// contender writes, reads back and cleans up its own objects before the
// other's turn; the clients are the contenders (getrusage).
func (s *suite) radosBench(ctx context.Context, c *cluster) *Section {
	secs := max(1, int(math.Round(s.cfg.Runtime.Seconds())))
	sec := &Section{
		ID:         "rados",
		Title:      fmt.Sprintf("RADOS objects (%s): purerbd rados bench vs rados bench", c.store),
		Short:      "RADOS " + c.store,
		Contenders: []string{"purerbd", "librados"},
		CPUOf:      "client process (getrusage of `purerbd rados bench` / `rados bench`, start-up included)",
		LatOf:      "reported by these tools as a mean only (the mean column)",
		Method: fmt.Sprintf("One mon and one %s OSD on 127.0.0.1 (cephx, msgr2, the OSDs' default crc mode), pool `rbd`. "+
			"`purerbd rados -p rbd bench %[2]d write -t QD -b BS --no-cleanup` then `... bench %[2]d rand -t QD`, against "+
			"`rados -p rbd bench` with the same arguments; each contender then removes its objects with its own "+
			"`cleanup`. The tools report mean latency, not percentiles.", c.store, secs),
	}
	c.watchOSD(sec)
	s.label(c, sec)
	type group struct{ write, read *Case }
	var groups []group
	for _, g := range pick(s.cfg,
		[]struct{ bs, qd, unit string }{{"4K", "32", "IOPS"}, {"4M", "16", "MiB/s"}},
		[]struct{ bs, qd, unit string }{{"4K", "32", "IOPS"}}) {
		w := newCase(fmt.Sprintf("%s write QD%s", g.bs, g.qd), g.unit, "", 0, "bs", g.bs, "qd", g.qd)
		r := newCase(fmt.Sprintf("%s rand read QD%s", g.bs, g.qd), g.unit, "", 0, "bs", g.bs, "qd", g.qd)
		sec.Cases = append(sec.Cases, w, r)
		groups = append(groups, group{w, r})
	}
	run := func(ctx context.Context, who string, w, r *Case) ([2]Sample, error) {
		var out [2]Sample
		runName := "bench-" + who
		args := func(mode string, c *Case) []string {
			a := []string{"-p", "rbd", "bench", strconv.Itoa(secs), mode, "-t", c.Params["qd"], "--run-name", runName}
			if mode == "write" {
				a = append(a, "-b", c.Params["bs"], "--no-cleanup")
			}
			return a
		}
		tool := func(a ...string) (childResult, error) {
			if who == "purerbd" {
				return s.purerbd(ctx, c, "rados", a...)
			}
			return s.tool(ctx, c, "rados", a...)
		}
		for i, cs := range []*Case{w, r} {
			mode := "write"
			if i == 1 {
				mode = "rand"
			}
			smp, err := sec.measure(s.log, func() (Sample, error) {
				cr, err := tool(args(mode, cs)...)
				if err != nil {
					return Sample{}, err
				}
				smp, err := parseRadosBench(cr.Stdout, cs.Unit == "IOPS")
				smp.CPU, smp.RSS = cr.CPU, cr.RSS
				return smp, err
			})
			if err != nil {
				return out, err
			}
			out[i] = smp
		}
		_, err := tool("-p", "rbd", "cleanup", "--run-name", runName)
		return out, err
	}
	t0 := time.Now()
	sec.LoadStart = loadavg()
	for rep := 1; rep <= s.cfg.Reps && ctx.Err() == nil; rep++ {
		for gi, g := range groups {
			// Who goes first alternates, as in interleave: the first
			// writer after a group of small objects makes the memstore
			// OSD grow its memory for 4 MiB objects, which the next one
			// finds ready (0.41x when purerbd always went first).
			for _, who := range runOrder(sec.Contenders, rep, gi) {
				rctx, cancel := context.WithTimeout(ctx, runTimeout)
				smp, err := run(rctx, who, g.write, g.read)
				cancel()
				for i, cs := range []*Case{g.write, g.read} {
					if smp[i].Ops > 0 {
						sec.record(s.log, cs, who, rep, smp[i])
					}
				}
				if err != nil {
					s.log.Warn("run failed", "section", sec.ID, "case", g.write.Name, "contender", who, "err", err)
					g.write.Errors = append(g.write.Errors, fmt.Sprintf("%s (rep %d): %v", who, rep, err))
				}
			}
		}
	}
	sec.LoadEnd, sec.Elapsed = loadavg(), time.Since(t0)
	return sec
}

var (
	reRadosTime = regexp.MustCompile(`(?m)^Total time run:\s+([0-9.]+)`)
	reRadosOps  = regexp.MustCompile(`(?m)^Total (?:writes|reads) made:\s+([0-9]+)`)
	reRadosSize = regexp.MustCompile(`(?m)^(?:Write|Read) size:\s+([0-9]+)`)
	reRadosLat  = regexp.MustCompile(`(?m)^Average Latency\(s\):\s+([0-9.eE+-]+)`)
)

// parseRadosBench reads the summary `rados bench` prints (and `purerbd
// rados bench` copies).
func parseRadosBench(out []byte, iops bool) (Sample, error) {
	get := func(re *regexp.Regexp) (float64, error) {
		m := re.FindSubmatch(out)
		if m == nil {
			return 0, fmt.Errorf("rados bench output lacks %q: %s", re.String(), lastLines(out, 3))
		}
		return strconv.ParseFloat(string(m[1]), 64)
	}
	t, err1 := get(reRadosTime)
	n, err2 := get(reRadosOps)
	size, err3 := get(reRadosSize)
	lat, err4 := get(reRadosLat)
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return Sample{}, err
		}
	}
	if t <= 0 || n <= 0 {
		return Sample{}, fmt.Errorf("rados bench did no I/O: %s", lastLines(out, 3))
	}
	s := Sample{Ops: int64(n), Bytes: int64(n * size), Seconds: t, MeanLat: lat * 1e9}
	if iops {
		s.Value = n / t
	} else {
		s.Value = n * size / (1 << 20) / t
	}
	return s, nil
}
