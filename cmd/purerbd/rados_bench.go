package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerbd/purerbd/internal/hugebuf"
	"github.com/purerbd/purerbd/rados"
)

// `purerbd rados bench`: the rados tool's benchmark — concurrent whole
// object writes, then sequential or random reads of them — with the same
// summary lines, so the two can be run side by side on one cluster.

// benchMetaDefault names the object where a write run records what it
// left (rados uses benchmark_last_metadata, in its own format).
const benchMetaDefault = "purerbd_bench_last_metadata"

type benchOptions struct {
	threads   int
	size      int
	noCleanup bool
	runName   string
}

func defaultBenchOptions() benchOptions { return benchOptions{threads: 16, size: 4 << 20} }

// benchMeta is what a write run leaves for seq, rand and cleanup.
type benchMeta struct {
	Prefix  string `json:"prefix"`
	Objects int64  `json:"objects"`
	Size    int    `json:"size"`
}

// benchStats collects the latencies of one run as running figures (the
// summary needs count, mean, deviation, extremes and the last one), so
// that recording costs the same at the end of a long run as at its start.
type benchStats struct {
	mu         sync.Mutex
	n          int64
	sum, sumSq float64 // seconds
	minL, maxL time.Duration
	last       time.Duration
	started    atomic.Int64
	finished   atomic.Int64
	bytesDone  atomic.Int64
}

func (s *benchStats) record(d time.Duration, n int) {
	sec := d.Seconds()
	s.mu.Lock()
	if s.n == 0 || d < s.minL {
		s.minL = d
	}
	s.maxL = max(s.maxL, d)
	s.n++
	s.sum += sec
	s.sumSq += sec * sec
	s.last = d
	s.mu.Unlock()
	s.finished.Add(1)
	s.bytesDone.Add(int64(n))
}

// snapshot returns the count, mean and standard deviation (seconds), the
// extremes and the last latency recorded.
func (s *benchStats) snapshot() (n int64, mean, sd float64, minL, maxL, last time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return 0, 0, 0, 0, 0, 0
	}
	mean = s.sum / float64(s.n)
	sd = math.Sqrt(max(0, s.sumSq/float64(s.n)-mean*mean))
	return s.n, mean, sd, s.minL, s.maxL, s.last
}

func (c *radosCommand) metaName() string {
	if c.bench.runName != "" {
		return c.bench.runName
	}
	return benchMetaDefault
}

func (c *radosCommand) runBench(ctx context.Context, args []string) error {
	secs, err := strconv.Atoi(args[0])
	if err != nil || secs <= 0 {
		return fmt.Errorf("bench: bad duration %q", args[0])
	}
	if c.bench.threads <= 0 {
		return errors.New("bench: -t must be positive")
	}
	dur := time.Duration(secs) * time.Second
	switch args[1] {
	case "write":
		return c.benchWrite(ctx, dur)
	case "seq", "rand":
		return c.benchRead(ctx, dur, args[1] == "rand")
	}
	return fmt.Errorf("bench: unknown mode %q (write, seq or rand)", args[1])
}

func (c *radosCommand) benchWrite(ctx context.Context, dur time.Duration) error {
	host, _ := os.Hostname()
	meta := benchMeta{Prefix: fmt.Sprintf("benchmark_data_%s_%d", host, os.Getpid()), Size: c.bench.size}
	fmt.Fprintf(c.stdout, "Maintaining %d concurrent writes of %d bytes to objects of size %d for up to %d seconds or 0 objects\n",
		c.bench.threads, meta.Size, meta.Size, int(dur.Seconds()))
	fmt.Fprintf(c.stdout, "Object prefix: %s\n", meta.Prefix)
	buf := make([]byte, meta.Size)
	for i := range buf {
		buf[i] = byte('A' + i%26)
	}
	var next atomic.Int64
	st := &benchStats{}
	elapsed, err := c.benchLoop(ctx, dur, st, 0, func(ctx context.Context, _ []byte) (int, error) {
		i := next.Add(1) - 1
		return len(buf), c.io.WriteFull(ctx, fmt.Sprintf("%s_object%d", meta.Prefix, i), buf)
	})
	meta.Objects = next.Load()
	c.benchSummary("write", elapsed, st, meta.Size)
	if err != nil {
		return err
	}
	if c.bench.noCleanup {
		b, _ := json.Marshal(meta)
		return c.io.WriteFull(ctx, c.metaName(), b)
	}
	return c.benchCleanup(ctx, meta, next.Load())
}

func (c *radosCommand) benchRead(ctx context.Context, dur time.Duration, random bool) error {
	raw, err := c.io.ReadAll(ctx, c.metaName())
	if err != nil {
		return fmt.Errorf("no benchmark objects to read (run 'bench N write --no-cleanup' first): %s", errnoText(err))
	}
	var meta benchMeta
	if err := json.Unmarshal(raw, &meta); err != nil || meta.Objects <= 0 || meta.Size <= 0 {
		return fmt.Errorf("bad benchmark metadata in %s", c.metaName())
	}
	var next atomic.Int64
	st := &benchStats{}
	elapsed, err := c.benchLoop(ctx, dur, st, meta.Size, func(ctx context.Context, buf []byte) (int, error) {
		var i int64
		if random {
			i = rand.Int64N(meta.Objects)
		} else if i = next.Add(1) - 1; i >= meta.Objects {
			return 0, errBenchDone
		}
		n, err := c.io.Read(ctx, fmt.Sprintf("%s_object%d", meta.Prefix, i), buf, 0)
		if err == nil && n != meta.Size {
			err = fmt.Errorf("object %d: read %d bytes, want %d", i, n, meta.Size)
		}
		return n, err
	})
	c.benchSummary("read", elapsed, st, meta.Size)
	return err
}

// errBenchDone ends a sequential read run that read every object.
var errBenchDone = errors.New("all objects read")

// benchLoop runs op on c.bench.threads workers for dur, printing a line a
// second as the rados tool does; each worker passes op its own buffer of
// bufSize bytes.
func (c *radosCommand) benchLoop(ctx context.Context, dur time.Duration, st *benchStats, bufSize int,
	op func(ctx context.Context, buf []byte) (int, error)) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	deadline := start.Add(dur)
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	for w := 0; w < c.bench.threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// large reads land in memory the TLB covers (hugebuf; see
			// the rbd bench's buffers)
			hb := hugebuf.Alloc(bufSize)
			defer hb.Free()
			buf := hb.Bytes()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				st.started.Add(1)
				t0 := time.Now()
				n, err := op(ctx, buf)
				if err != nil {
					if !errors.Is(err, errBenchDone) && ctx.Err() == nil {
						firstErr.CompareAndSwap(nil, &err)
					}
					cancel()
					return
				}
				st.record(time.Since(t0), n)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	fmt.Fprintln(c.stdout, "  sec Cur ops   started  finished  avg MB/s  cur MB/s last lat(s)  avg lat(s)")
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastBytes := int64(0)
	for sec := 1; ; sec++ {
		select {
		case <-done:
			elapsed := time.Since(start)
			if p := firstErr.Load(); p != nil {
				return elapsed, *p
			}
			return elapsed, nil
		case <-tick.C:
		}
		b := st.bytesDone.Load()
		_, mean, _, _, _, last := st.snapshot()
		fin := st.finished.Load()
		fmt.Fprintf(c.stdout, "%5d %7d %9d %9d %9.4f %9.4f %10.6f %11.6f\n", sec, st.started.Load()-fin,
			st.started.Load(), fin, float64(b)/(1<<20)/float64(sec), float64(b-lastBytes)/(1<<20),
			last.Seconds(), mean)
		lastBytes = b
	}
}

// benchSummary prints the rados tool's summary lines.
func (c *radosCommand) benchSummary(kind string, elapsed time.Duration, st *benchStats, size int) {
	n, avg, sd, minL, maxL, _ := st.snapshot()
	secs := elapsed.Seconds()
	label := "Write"
	made := "Total writes made:"
	if kind == "read" {
		label, made = "Read", "Total reads made:"
	}
	fmt.Fprintf(c.stdout, "Total time run:         %.4f\n", secs)
	fmt.Fprintf(c.stdout, "%-24s%d\n", made, n)
	fmt.Fprintf(c.stdout, "%-24s%d\n", label+" size:", size)
	fmt.Fprintf(c.stdout, "%-24s%d\n", "Object size:", size)
	fmt.Fprintf(c.stdout, "%-24s%.4f\n", "Bandwidth (MB/sec):", float64(st.bytesDone.Load())/(1<<20)/secs)
	fmt.Fprintf(c.stdout, "%-24s%d\n", "Average IOPS:", int(math.Round(float64(n)/secs)))
	fmt.Fprintf(c.stdout, "%-24s%.6f\n", "Average Latency(s):", avg)
	fmt.Fprintf(c.stdout, "%-24s%.6f\n", "Stddev Latency(s):", sd)
	fmt.Fprintf(c.stdout, "%-24s%.6f\n", "Max latency(s):", maxL.Seconds())
	fmt.Fprintf(c.stdout, "%-24s%.6f\n", "Min latency(s):", minL.Seconds())
}

// benchCleanup removes count benchmark objects.
func (c *radosCommand) benchCleanup(ctx context.Context, meta benchMeta, count int64) error {
	fmt.Fprintln(c.stdout, "Cleaning up (deleting benchmark objects)")
	t0 := time.Now()
	var next, removed atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, c.bench.threads)
	for w := 0; w < c.bench.threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= count {
					return
				}
				err := c.io.Remove(ctx, fmt.Sprintf("%s_object%d", meta.Prefix, i))
				if err != nil && !errors.Is(err, rados.ErrNotFound) {
					errc <- err
					return
				}
				if err == nil {
					removed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return fmt.Errorf("bench cleanup: %s", errnoText(err))
	}
	fmt.Fprintf(c.stdout, "Removed %d objects\n", removed.Load())
	fmt.Fprintf(c.stdout, "Clean up completed and total clean up time :%.6f\n", time.Since(t0).Seconds())
	return nil
}

// cleanup removes what a write run with --no-cleanup left.
func (c *radosCommand) cleanup(ctx context.Context) error {
	raw, err := c.io.ReadAll(ctx, c.metaName())
	if err != nil {
		return fmt.Errorf("no benchmark metadata (%s): %s", c.metaName(), errnoText(err))
	}
	var meta benchMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("bad benchmark metadata in %s", c.metaName())
	}
	if err := c.benchCleanup(ctx, meta, meta.Objects); err != nil {
		return err
	}
	return c.io.Remove(ctx, c.metaName())
}
