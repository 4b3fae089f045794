package loadgen

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Target is what a workload runs against: an rbd.Image through an
// adapter, an NBD backend, objects in a pool.
type Target interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	WriteAt(ctx context.Context, p []byte, off int64) (int, error)
}

// Options describe a workload.
type Options struct {
	RW      string        // randread, randwrite, read (sequential) or write (sequential)
	BS      int           // bytes per request
	QD      int           // requests in flight
	Runtime time.Duration // how long to keep issuing requests
	Size    int64         // the region [0, Size) the offsets fall in
}

// Result is what a run measured.
type Result struct {
	Ops     int64   `json:"ops"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	IOPS    float64 `json:"iops"`
	MiBps   float64 `json:"mib_per_s"`
	MeanNS  float64 `json:"mean_ns"`
	// Percentiles are completion latencies in nanoseconds keyed as in
	// fio's JSON ("99.900000").
	Percentiles map[string]uint64 `json:"percentiles"`
}

func (o Options) check() error {
	switch o.RW {
	case "randread", "randwrite", "read", "write":
	default:
		return fmt.Errorf("loadgen: unknown pattern %q (randread, randwrite, read, write)", o.RW)
	}
	if o.BS <= 0 || o.QD <= 0 || o.Runtime <= 0 {
		return errors.New("loadgen: block size, queue depth and runtime must be positive")
	}
	if o.Size < int64(o.BS) {
		return fmt.Errorf("loadgen: region of %d bytes is smaller than one %d-byte request", o.Size, o.BS)
	}
	return nil
}

// Run keeps o.QD requests in flight against t for o.Runtime and returns
// the throughput and the latency distribution. The first failed request
// stops the run and is returned.
func Run(ctx context.Context, t Target, o Options) (Result, error) {
	if err := o.check(); err != nil {
		return Result{}, err
	}
	write := o.RW == "randwrite" || o.RW == "write"
	random := o.RW == "randread" || o.RW == "randwrite"
	blocks := o.Size / int64(o.BS)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		next     atomic.Int64 // sequential patterns: the next block
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		hist     Histogram
	)
	start := time.Now()
	deadline := start.Add(o.Runtime)
	var lastDone atomic.Int64 // nanoseconds after start of the last completion
	for w := 0; w < o.QD; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			buf := make([]byte, o.BS)
			if write {
				// random data, 8 bytes per draw (a byte per draw cost
				// 10% of a short 4 MiB write run's CPU)
				for i := 0; i+8 <= len(buf); i += 8 {
					binary.LittleEndian.PutUint64(buf[i:], rng.Uint64())
				}
			}
			for ctx.Err() == nil && time.Now().Before(deadline) {
				var blk int64
				if random {
					blk = rng.Int64N(blocks)
				} else {
					blk = (next.Add(1) - 1) % blocks
				}
				off := blk * int64(o.BS)
				t0 := time.Now()
				var err error
				if write {
					_, err = t.WriteAt(ctx, buf, off)
				} else {
					_, err = t.ReadAt(ctx, buf, off)
				}
				done := time.Now()
				if err != nil {
					if ctx.Err() == nil {
						errOnce.Do(func() { firstErr = fmt.Errorf("loadgen: %s at %d: %w", o.RW, off, err); cancel() })
					}
					return
				}
				hist.Record(uint64(done.Sub(t0)))
				for d := int64(done.Sub(start)); ; {
					old := lastDone.Load()
					if d <= old || lastDone.CompareAndSwap(old, d) {
						break
					}
				}
			}
		}(w)
	}
	wg.Wait()
	if firstErr != nil {
		return Result{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	r := Result{
		Ops:         int64(hist.Count()),
		Bytes:       int64(hist.Count()) * int64(o.BS),
		Seconds:     time.Duration(lastDone.Load()).Seconds(),
		MeanNS:      hist.Mean(),
		Percentiles: hist.Percentiles(),
	}
	if r.Seconds > 0 {
		r.IOPS = float64(r.Ops) / r.Seconds
		r.MiBps = float64(r.Bytes) / (1 << 20) / r.Seconds
	}
	return r, nil
}
