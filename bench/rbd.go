package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// rbdVariant is one image configuration the RBD workloads run on.
type rbdVariant struct {
	id, title, short string
	features         string // for rbd create --image-feature; "" = librbd's defaults
	full             bool   // the whole case matrix (else the reduced one)
	// cache leaves librbd's cache at its default (on, writearound: writes
	// complete once in the cache) and turns purerbd's write-around cache
	// on; otherwise rbd_cache = false, so that librbd, like purerbd,
	// completes a write when the OSD has it.
	cache bool
}

// rbdCases is the workload matrix: 4 KiB random reads and writes at
// several queue depths, 64 KiB and 4 MiB sequential. The reduced matrix
// keeps the cases that tell the variants apart.
func (s *suite) rbdCases(full bool) []*Case {
	var cs []*Case
	qds := pick(s.cfg, []int{1, 8, 32, 128}, []int{1, 32})
	if !full {
		qds = []int{1, 32}
	}
	for _, rw := range []string{"randread", "randwrite"} {
		for _, qd := range qds {
			if !full && rw == "randread" && qd == 1 {
				continue
			}
			c := newCase(fmt.Sprintf("4k %s QD%d", rw, qd), "IOPS", "4k "+rw, float64(qd),
				"rw", rw, "bs", "4K", "qd", strconv.Itoa(qd))
			if qd == 32 {
				c.Params["latplot"] = "1"
			}
			cs = append(cs, c)
		}
	}
	seq := []string{"64K", "4M"}
	if !full || s.cfg.Quick {
		seq = []string{"4M"}
	}
	reads := full && !s.cfg.Quick
	for _, bs := range seq {
		for _, rw := range []string{"read", "write"} {
			if !reads && rw == "read" {
				continue
			}
			cs = append(cs, newCase(fmt.Sprintf("%s seq %s QD16", bs, rw), "MiB/s", "", 0,
				"rw", rw, "bs", bs, "qd", "16"))
		}
		if bs == "64K" {
			// small sequential writes (a journal, a log): librbd merges
			// those that continue one in flight into one OSD write, and
			// so does purerbd
			cs = append(cs, newCase("4K seq write QD16", "IOPS", "", 0, "rw", "write", "bs", "4K", "qd", "16"))
			// the same writes at random offsets: 16 sequential 64 KiB
			// writes in flight all fall in one 4 MiB object, random ones
			// mostly do not, which tells per-object serialisation apart
			cs = append(cs, newCase("64K rand write QD16", "MiB/s", "", 0, "rw", "randwrite", "bs", bs, "qd", "16"))
		}
	}
	return cs
}

// rbdLoad compares purerbd's rbd package (the suite's load generator,
// purerbd-bench load, a child process) with librbd driven by fio's rbd
// engine, on one image: same pattern, block size, requests in flight and
// run time; the clients are the contenders.
func (s *suite) rbdLoad(ctx context.Context, c *cluster, v rbdVariant, imageSize int64) *Section {
	feat := v.features
	if feat == "" {
		feat = "librbd's defaults: layering, exclusive-lock, object-map, fast-diff, deep-flatten"
	}
	peer, cacheNote := "librbd", "with `rbd cache = false` (like purerbd, which has no cache, a write completes "+
		"when the OSD acknowledged it)"
	conf := "ceph-nocache.conf"
	if v.cache {
		peer, cacheNote = "librbd-cache", "with librbd's default cache (Pacific: on, `rbd_cache_policy = writearound`: "+
			"a write completes once it is in the client's cache, before the OSD has it; reads are not served "+
			"from it), and purerbd with the same cache (`--write-around`: rbd.WriteAround, 24 MiB as librbd's "+
			"`rbd_cache_max_dirty`)"
		conf = c.Conf
	}
	sec := &Section{
		ID:         "rbd-" + v.id,
		Title:      v.title,
		Short:      v.short,
		Contenders: []string{"purerbd", peer},
		CPUOf:      "client process (getrusage of purerbd-bench load / fio, start-up included)",
		LatOf:      "per-request completion latency (purerbd-bench load's histogram; fio's clat)",
		Method: fmt.Sprintf("A %s image (features: %s) on one %s OSD, created and filled by `rbd`. purerbd: "+
			"`purerbd-bench load` (bench/internal/loadgen on rbd.Image: QD goroutines each issuing "+
			"ReadAtContext/WriteAtContext back to back, latencies in a log-linear histogram). %s: fio "+
			"`ioengine=rbd` (rbd_aio_* with iodepth in flight) %s. Both time-based, %s per run, offsets "+
			"uniform over the image (random) or wrapping around it (sequential).",
			humanSize(imageSize), feat, c.store, peer, cacheNote, s.cfg.Runtime),
	}
	c.watchOSD(sec)
	s.label(c, sec)
	if why := c.havePeer("fio"); why != "" {
		sec.Skipped = why
		return sec
	}
	dir, err := s.peerDir(c, sec.ID)
	if err != nil {
		sec.Skipped = err.Error()
		return sec
	}
	if !v.cache {
		conf = filepath.Join(dir, conf)
		if err := noCacheConf(c.Conf, conf); err != nil {
			sec.Skipped = err.Error()
			return sec
		}
	}
	image := "bench-" + v.id
	if err := s.makeImage(ctx, c, image, imageSize, v.features); err != nil {
		sec.Skipped = "creating the image: " + err.Error()
		return sec
	}
	sec.Cases = s.rbdCases(v.full)
	if v.cache {
		// a write cache changes nothing for reads; small writes show it
		sec.Cases = slices.DeleteFunc(sec.Cases, func(c *Case) bool { return c.Params["rw"] != "randwrite" })
	}
	run := func(ctx context.Context, who string, cs *Case) (Sample, error) {
		qd, _ := strconv.Atoi(cs.Params["qd"])
		iops := cs.Unit == "IOPS"
		if who != "purerbd" {
			smp, cr, err := runFio(ctx, c.command, dir, []string{"CEPH_CONF=" + conf}, fioJob{
				Name: "rbd", Engine: []string{"--ioengine=rbd", "--clientname=admin", "--pool=rbd", "--rbdname=" + image},
				RW: cs.Params["rw"], BS: strings.ToLower(cs.Params["bs"]), QD: qd, Size: strconv.FormatInt(imageSize, 10),
				Runtime: s.cfg.Runtime,
			}, iops)
			smp.CPU, smp.RSS = cr.CPU, cr.RSS
			return smp, err
		}
		var extra []string
		if v.cache {
			extra = []string{"--write-around"}
		}
		return s.loadgen(ctx, c, []string{"--image", image}, cs.Params["rw"], cs.Params["bs"], qd, iops, extra)
	}
	sec.interleave(ctx, s.log, s.cfg.Reps, run)
	if _, err := s.tool(ctx, c, "rbd", "rm", "--no-progress", "rbd/"+image); err != nil {
		s.log.Warn("bench: removing image", "image", image, "err", err)
	}
	return sec
}

// noCacheConf writes a copy of the cluster's ceph.conf that turns
// librbd's cache off.
func noCacheConf(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	conf := string(b)
	if !strings.Contains(conf, "[client]\n") {
		conf += "[client]\n"
	}
	conf = strings.Replace(conf, "[client]\n", "[client]\n\trbd cache = false\n", 1)
	return os.WriteFile(dst, []byte(conf), 0o600)
}

// loadResult is what `purerbd-bench load` prints.
type loadResult struct {
	Ops         int64              `json:"ops"`
	Bytes       int64              `json:"bytes"`
	Seconds     float64            `json:"seconds"`
	MeanNS      float64            `json:"mean_ns"`
	Percentiles map[string]float64 `json:"percentiles"`
}

// loadgen runs `purerbd-bench load` against the cluster with target
// (--image NAME or --objects PREFIX) and extra flags (profiles).
func (s *suite) loadgen(ctx context.Context, c *cluster, target []string, rw, bs string, qd int, iops bool, extra []string) (Sample, error) {
	args := append([]string{"load", "-c", c.Conf, "-p", "rbd", "--rw", rw, "--bs", bs, "--qd", strconv.Itoa(qd),
		"--runtime", s.cfg.Runtime.String()}, target...)
	cr, err := runChild(ctx, s.work, nil, s.bin("purerbd-bench"), append(args, extra...)...)
	if err != nil {
		return Sample{}, err
	}
	var r loadResult
	if err := json.Unmarshal(cr.Stdout, &r); err != nil {
		return Sample{}, fmt.Errorf("purerbd-bench load output: %w", err)
	}
	if r.Ops == 0 || r.Seconds <= 0 {
		return Sample{}, fmt.Errorf("purerbd-bench load did no I/O")
	}
	smp := Sample{Ops: r.Ops, Bytes: r.Bytes, Seconds: r.Seconds, CPU: cr.CPU, RSS: cr.RSS,
		Lat: latencyOf(r.Percentiles), MeanLat: r.MeanNS}
	if iops {
		smp.Value = float64(r.Ops) / r.Seconds
	} else {
		smp.Value = float64(r.Bytes) / (1 << 20) / r.Seconds
	}
	return smp, nil
}

// rbdCLICases are the rbd bench CLI pair's cases (issue #5's four in
// full mode) on an image of imageSize bytes.
func (s *suite) rbdCLICases(imageSize int64) []*Case {
	var cs []*Case
	// 4 KiB: 256 MiB (65536 I/Os, seconds at this OSD's rate) is well
	// past the 24 MiB both write-around caches acknowledge ahead of the
	// OSD, so a run measures the steady state rather than how fast one
	// burst drains; 4 MiB: twice the image, wrapping around, so that a
	// run lasts seconds too rather than a few tenths in which start-up
	// transients weigh as much as the transfer
	small := pick(s.cfg, "256M", "8M")
	big := humanSize(pick(s.cfg, 2*imageSize, imageSize))
	type cliCase struct{ typ, bs, threads, total, pattern, unit string }
	for _, k := range pick(s.cfg, []cliCase{
		{"write", "4K", "16", small, "rand", "IOPS"},
		{"read", "4K", "16", small, "rand", "IOPS"},
		{"write", "4M", "16", big, "seq", "MiB/s"},
		{"read", "4M", "16", big, "seq", "MiB/s"},
	}, []cliCase{
		{"write", "4K", "16", small, "rand", "IOPS"},
		{"write", "4M", "16", big, "seq", "MiB/s"},
	}) {
		cs = append(cs, newCase(fmt.Sprintf("%s %s %s t%s (%s total)", k.bs, k.pattern, k.typ, k.threads, k.total),
			k.unit, "", 0, "type", k.typ, "bs", k.bs, "threads", k.threads, "total", k.total, "pattern", k.pattern))
	}
	return cs
}

// rbdCLI compares the shipped tools: `purerbd rbd bench` against `rbd
// bench`, same arguments, fixed amount of I/O.
func (s *suite) rbdCLI(ctx context.Context, c *cluster, imageSize int64) *Section {
	sec := &Section{
		ID:         "rbd-cli",
		Title:      fmt.Sprintf("rbd bench CLIs (%s): purerbd rbd bench vs rbd bench", c.store),
		Short:      "rbd bench CLI",
		Contenders: []string{"purerbd", "librbd"},
		CPUOf:      "client process (getrusage of `purerbd rbd bench` / `rbd bench`, start-up included)",
		LatOf:      "not reported by these tools",
		Method: fmt.Sprintf("`purerbd rbd bench` and `rbd bench` with the same `--io-type --io-size --io-threads "+
			"--io-total --io-pattern` on a %s image with librbd's default features, filled first; each tool "+
			"as shipped: both with a write-around cache (librbd's default `rbd_cache`, writearound, 24 MiB "+
			"dirty, on from the first write as the rbd tool sets it; purerbd's rbd.WriteAround with the same "+
			"bound), so a write completes once sent and both tools flush before they stop the clock. These "+
			"tools run a fixed amount of I/O and report only ops/s.", humanSize(imageSize)),
	}
	c.watchOSD(sec)
	s.label(c, sec)
	image := "bench-cli"
	if err := s.makeImage(ctx, c, image, imageSize, ""); err != nil {
		sec.Skipped = "creating the image: " + err.Error()
		return sec
	}
	sec.Cases = s.rbdCLICases(imageSize)
	run := func(ctx context.Context, who string, cs *Case) (Sample, error) {
		args := []string{"bench", "--io-type", cs.Params["type"], "--io-size", cs.Params["bs"], "--io-threads",
			cs.Params["threads"], "--io-total", cs.Params["total"], "--io-pattern", cs.Params["pattern"], "rbd/" + image}
		var cr childResult
		var err error
		if who == "purerbd" {
			cr, err = s.purerbd(ctx, c, "rbd", args...)
		} else {
			cr, err = s.tool(ctx, c, "rbd", args...)
		}
		if err != nil {
			return Sample{}, err
		}
		bs, _ := parseSizeSuffix(cs.Params["bs"])
		smp, err := parseRbdBench(cr.Stdout, bs, cs.Unit == "IOPS")
		smp.CPU, smp.RSS = cr.CPU, cr.RSS
		return smp, err
	}
	// these runs are short (a fixed amount of I/O, about a second at
	// 4 KiB): two more repetitions than the rest steady the medians
	reps := s.cfg.Reps + 2
	sec.Notes = append(sec.Notes, fmt.Sprintf("%d repetitions per contender and case here (short runs).", reps))
	sec.interleave(ctx, s.log, reps, run)
	if _, err := s.tool(ctx, c, "rbd", "rm", "--no-progress", "rbd/"+image); err != nil {
		s.log.Warn("bench: removing image", "image", image, "err", err)
	}
	return sec
}

var reRbdBench = regexp.MustCompile(`elapsed:\s*([0-9.]+)\s+ops:\s*([0-9]+)\s+ops/sec:\s*([0-9.]+)`)

// parseRbdBench reads the summary line of `rbd bench` (which `purerbd
// rbd bench` copies): "elapsed: 5  ops: 262144  ops/sec: 48943.83  ...".
func parseRbdBench(out []byte, bs int64, iops bool) (Sample, error) {
	m := reRbdBench.FindSubmatch(out)
	if m == nil {
		return Sample{}, fmt.Errorf("no summary line in rbd bench output: %s", lastLines(out, 3))
	}
	ops, _ := strconv.ParseInt(string(m[2]), 10, 64)
	rate, _ := strconv.ParseFloat(string(m[3]), 64)
	if ops == 0 || rate == 0 {
		return Sample{}, fmt.Errorf("rbd bench did no I/O: %s", lastLines(out, 3))
	}
	s := Sample{Ops: ops, Bytes: ops * bs, Seconds: float64(ops) / rate, MeanLat: math.NaN()}
	if iops {
		s.Value = rate
	} else {
		s.Value = rate * float64(bs) / (1 << 20)
	}
	return s, nil
}

// parseSizeSuffix reads "4K", "4M", "1G" or a plain byte count.
func parseSizeSuffix(v string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(v, "K"):
		mult = 1 << 10
	case strings.HasSuffix(v, "M"):
		mult = 1 << 20
	case strings.HasSuffix(v, "G"):
		mult = 1 << 30
	}
	if mult != 1 {
		v = v[:len(v)-1]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n * mult, err
}
