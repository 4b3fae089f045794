package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// fioJob is one fio run: an engine with its options and a workload.
type fioJob struct {
	Name    string
	Engine  []string // --ioengine=... and the engine's own options
	RW      string   // randread, randwrite, read, write
	BS      string   // 4k, 1M
	QD      int
	Size    string // region exercised, e.g. 512M
	Runtime time.Duration
	Ramp    time.Duration
}

func (j fioJob) args(out string) []string {
	a := []string{"--name=" + j.Name}
	a = append(a, j.Engine...)
	a = append(a,
		"--rw="+j.RW, "--bs="+j.BS, "--iodepth="+strconv.Itoa(j.QD), "--numjobs=1", "--thread",
		"--size="+j.Size, "--time_based", fmt.Sprintf("--runtime=%dms", j.Runtime.Milliseconds()),
		"--output-format=json", "--output="+out)
	if j.Ramp > 0 {
		a = append(a, fmt.Sprintf("--ramp_time=%dms", j.Ramp.Milliseconds()))
	}
	return a
}

// fioDirStats is one direction (read or write) of fio's JSON output.
type fioDirStats struct {
	IOBytes  int64   `json:"io_bytes"`
	IOPS     float64 `json:"iops"`
	Runtime  int64   `json:"runtime"` // ms
	TotalIOs int64   `json:"total_ios"`
	ClatNS   struct {
		Mean       float64            `json:"mean"`
		Percentile map[string]float64 `json:"percentile"`
	} `json:"clat_ns"`
}

type fioOutput struct {
	Jobs []struct {
		Error int         `json:"error"`
		Read  fioDirStats `json:"read"`
		Write fioDirStats `json:"write"`
	} `json:"jobs"`
}

// runFio runs the job and returns its result as a Sample (value in IOPS
// when iops is true, else MiB/s) and fio's own usage.
func runFio(ctx context.Context, launch launcher, work string, env []string, j fioJob, iops bool) (Sample, childResult, error) {
	out := filepath.Join(work, "fio-"+j.Name+".json")
	os.Remove(out)
	cr, err := runCmd(launch(ctx, "fio", j.args(out)...), work, env)
	if err != nil {
		return Sample{}, cr, err
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return Sample{}, cr, fmt.Errorf("fio output: %w", err)
	}
	s, err := parseFio(b, iops)
	return s, cr, err
}

// parseFio reads fio's JSON (anything printed before the first '{' is
// skipped: some engines print a banner).
func parseFio(b []byte, iops bool) (Sample, error) {
	if i := bytes.IndexByte(b, '{'); i > 0 {
		b = b[i:]
	}
	var o fioOutput
	if err := json.Unmarshal(b, &o); err != nil {
		return Sample{}, fmt.Errorf("fio JSON: %w", err)
	}
	if len(o.Jobs) != 1 {
		return Sample{}, fmt.Errorf("fio JSON: %d jobs, want 1", len(o.Jobs))
	}
	job := o.Jobs[0]
	if job.Error != 0 {
		return Sample{}, fmt.Errorf("fio job error %d", job.Error)
	}
	d := job.Read
	if job.Write.TotalIOs > d.TotalIOs {
		d = job.Write
	}
	if d.TotalIOs == 0 || d.Runtime == 0 {
		return Sample{}, fmt.Errorf("fio did no I/O")
	}
	s := Sample{
		Ops:     job.Read.TotalIOs + job.Write.TotalIOs,
		Bytes:   job.Read.IOBytes + job.Write.IOBytes,
		Seconds: float64(max(job.Read.Runtime, job.Write.Runtime)) / 1000,
		CPU:     math.NaN(),
		Lat:     latencyOf(d.ClatNS.Percentile),
		MeanLat: d.ClatNS.Mean,
	}
	if iops {
		s.Value = float64(s.Ops) / s.Seconds
	} else {
		s.Value = float64(s.Bytes) / (1 << 20) / s.Seconds
	}
	return s, nil
}

// latencyOf turns fio's {"99.900000": ns} map into a Latency.
func latencyOf(m map[string]float64) *Latency {
	if len(m) == 0 {
		return nil
	}
	l := &Latency{}
	for k := range m {
		p, err := strconv.ParseFloat(k, 64)
		if err == nil {
			l.Percentiles = append(l.Percentiles, p)
		}
	}
	sort.Float64s(l.Percentiles)
	for _, p := range l.Percentiles {
		l.Nanos = append(l.Nanos, m[strconv.FormatFloat(p, 'f', 6, 64)])
	}
	return l
}
