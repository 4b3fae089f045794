package guestbench

import (
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"
)

// ioCase is one workload on a block device.
type ioCase struct {
	Name  string // "4k randread QD32"
	Unit  string // "IOPS" or "MiB/s"
	Write bool
	Rand  bool
	BS    int
	QD    int
}

// ioCases are the workloads: 4 KiB random reads and writes at queue
// depth 1 and 32, and 1 MiB sequential reads and writes.
func ioCases(quick bool) []ioCase {
	cs := []ioCase{
		{Name: "4k randread QD1", Unit: "IOPS", Rand: true, BS: 4096, QD: 1},
		{Name: "4k randread QD32", Unit: "IOPS", Rand: true, BS: 4096, QD: 32},
		{Name: "4k randwrite QD1", Unit: "IOPS", Write: true, Rand: true, BS: 4096, QD: 1},
		{Name: "4k randwrite QD32", Unit: "IOPS", Write: true, Rand: true, BS: 4096, QD: 32},
		{Name: "1M seq read QD1", Unit: "MiB/s", BS: 1 << 20, QD: 1},
		{Name: "1M seq write QD1", Unit: "MiB/s", Write: true, BS: 1 << 20, QD: 1},
	}
	if quick {
		return []ioCase{cs[1], cs[3], cs[5]}
	}
	return cs
}

// ioResult is one run of a case.
type ioResult struct {
	ops, bytes int64
	seconds    float64
	lat        []time.Duration // sorted
	// summary stands for lat where the client timed its requests
	// itself (fio)
	summary *latSummary
	// ownProcess: the client ran as a process of its own, which
	// started and connected within the run's window (fio), so the
	// guest-wide figures around it are not the run's
	ownProcess bool
}

// latSummary is a latency distribution a client reported: mean and
// percentiles in nanoseconds.
type latSummary struct {
	mean float64
	pct  map[float64]float64 // 50, 99, 99.9
}

func (r ioResult) percentile(p float64) float64 {
	if r.summary != nil {
		return r.summary.pct[p]
	}
	if len(r.lat) == 0 {
		return 0
	}
	i := int(p / 100 * float64(len(r.lat)))
	return float64(r.lat[min(i, len(r.lat)-1)])
}

func (r ioResult) mean() float64 {
	if r.summary != nil {
		return r.summary.mean
	}
	if len(r.lat) == 0 {
		return 0
	}
	var s time.Duration
	for _, d := range r.lat {
		s += d
	}
	return float64(s) / float64(len(r.lat))
}

// alignedBuf returns n bytes aligned for O_DIRECT (page-aligned anonymous
// memory).
func alignedBuf(n int) ([]byte, error) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", n, err)
	}
	return b, nil
}

// ioTarget is where one worker of a run sends its requests: an O_DIRECT
// descriptor of a block device, or a client's image.
type ioTarget interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Close() error
}

// runIO runs c on dev for d over its first span bytes. At depth 1 one
// goroutine issues raw pread/pwrite calls back to back (rawFile); deeper
// cases keep their requests in flight from one goroutine through Linux
// AIO (runAIO). With runtimeSyscalls, as runs before those did, QD
// goroutines each issue pread/pwrite through the Go runtime with an
// O_DIRECT descriptor and a buffer of their own. Sequential workloads
// wrap around the span.
func runIO(ctx context.Context, dev string, span int64, c ioCase, d time.Duration, runtimeSyscalls bool) (ioResult, error) {
	if c.QD > 1 && !runtimeSyscalls {
		return runAIO(ctx, dev, span, c, d)
	}
	return runWorkers(ctx, dev, span, c, d, func() (ioTarget, error) {
		f, err := openDirect(dev, c)
		if err != nil {
			return nil, err
		}
		if c.QD == 1 && !runtimeSyscalls {
			return rawFile{f}, nil
		}
		return f, nil
	})
}

// spanBlocks is how many blocks of c's size the first span bytes of
// name hold: at least one.
func spanBlocks(name string, span int64, c ioCase) (int64, error) {
	blocks := span / int64(c.BS)
	if blocks < 1 {
		return 0, fmt.Errorf("%s: span %d smaller than a block", name, span)
	}
	return blocks, nil
}

// setLatencies records a run's completed requests of bs bytes: their
// latencies, sorted, and the ops and bytes they make.
func (r *ioResult) setLatencies(lat []time.Duration, bs int) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r.lat = lat
	r.ops = int64(len(lat))
	r.bytes = r.ops * int64(bs)
}

// openDirect opens dev with O_DIRECT for c's direction.
func openDirect(dev string, c ioCase) (*os.File, error) {
	flag := os.O_RDONLY
	if c.Write {
		flag = os.O_WRONLY
	}
	f, err := os.OpenFile(dev, flag|syscall.O_DIRECT, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s O_DIRECT: %w", dev, err)
	}
	return f, nil
}

// runWorkers runs c for d over the first span bytes of what open gives
// each of QD goroutines: each issues its requests back to back with a
// page-aligned buffer of its own; sequential workloads wrap around the
// span. name is what errors call the target.
func runWorkers(ctx context.Context, name string, span int64, c ioCase, d time.Duration, open func() (ioTarget, error)) (ioResult, error) {
	blocks, err := spanBlocks(name, span, c)
	if err != nil {
		return ioResult{}, err
	}
	type worker struct {
		t   ioTarget
		buf []byte
		lat []time.Duration
		err error
	}
	ws := make([]*worker, c.QD)
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.t.Close()
				syscall.Munmap(w.buf)
			}
		}
	}()
	for i := range ws {
		t, err := open()
		if err != nil {
			return ioResult{}, err
		}
		buf, err := alignedBuf(c.BS)
		if err != nil {
			t.Close()
			return ioResult{}, err
		}
		if c.Write {
			_, _ = rand.Read(buf)
		}
		ws[i] = &worker{t: t, buf: buf, lat: make([]time.Duration, 0, 4096)}
	}
	var seq struct {
		sync.Mutex
		next int64
	}
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				var blk int64
				if c.Rand {
					blk = mrand.Int64N(blocks)
				} else {
					seq.Lock()
					blk = seq.next % blocks
					seq.next++
					seq.Unlock()
				}
				s := time.Now()
				if s.After(deadline) {
					return
				}
				var err error
				if c.Write {
					_, err = w.t.WriteAt(w.buf, blk*int64(c.BS))
				} else {
					_, err = w.t.ReadAt(w.buf, blk*int64(c.BS))
				}
				if err != nil {
					w.err = err
					return
				}
				w.lat = append(w.lat, time.Since(s))
			}
		}()
	}
	wg.Wait()
	var r ioResult
	r.seconds = time.Since(t0).Seconds()
	for _, w := range ws {
		if w.err != nil {
			return r, fmt.Errorf("%s %s: %w", name, c.Name, w.err)
		}
		r.lat = append(r.lat, w.lat...)
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	r.setLatencies(r.lat, c.BS)
	return r, nil
}

// fill writes the first span bytes of dev with 1 MiB O_DIRECT writes, so
// that reads hit written data.
func fill(dev string, span int64) error {
	f, err := os.OpenFile(dev, os.O_WRONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return fmt.Errorf("fill %s: %w", dev, err)
	}
	defer f.Close()
	buf, err := alignedBuf(1 << 20)
	if err != nil {
		return err
	}
	defer syscall.Munmap(buf)
	_, _ = rand.Read(buf)
	for off := int64(0); off+int64(len(buf)) <= span; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			return fmt.Errorf("fill %s at %d: %w", dev, off, err)
		}
	}
	return nil
}
