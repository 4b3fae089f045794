package loadgen

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"
)

func TestHistogramPercentiles(t *testing.T) {
	h := new(Histogram)
	for v := uint64(1); v <= 100000; v++ {
		h.Record(v * 1000) // 1 µs .. 100 ms, uniform
	}
	for _, p := range []float64{1, 50, 99, 99.9} {
		want := p / 100 * 1e8
		got := float64(h.Percentile(p))
		if math.Abs(got-want)/want > 0.02 {
			t.Errorf("p%v = %v, want %v ± 2%%", p, got, want)
		}
	}
	if h.Percentile(100) != 1e8 {
		t.Errorf("p100 = %d", h.Percentile(100))
	}
	if m := h.Mean(); math.Abs(m-50000500) > 1 {
		t.Errorf("mean %v", m)
	}
	small := new(Histogram)
	small.Record(3)
	if small.Percentile(50) != 3 {
		t.Errorf("exact small values: %d", small.Percentile(50))
	}
	if got := len(h.Percentiles()); got != 17 {
		t.Errorf("%d percentiles, want fio's 17", got)
	}
}

func TestBuckets(t *testing.T) {
	prev := -1
	for _, v := range []uint64{0, 1, 63, 64, 65, 127, 128, 1000, 1 << 20, 1<<39 + 5, maxValue} {
		b := bucketOf(v)
		if b <= prev || b >= buckets {
			t.Fatalf("bucketOf(%d) = %d (previous %d, %d buckets)", v, b, prev, buckets)
		}
		lo, w := lowest(b)
		if v < lo || v-lo >= w {
			t.Errorf("%d not in bucket %d [%d, +%d)", v, b, lo, w)
		}
		prev = b
	}
}

// memTarget is a slow in-memory disk.
type memTarget struct {
	mu   sync.Mutex
	data []byte
	fail bool
}

func (m *memTarget) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	time.Sleep(50 * time.Microsecond)
	m.mu.Lock()
	defer m.mu.Unlock()
	return copy(p, m.data[off:]), nil
}

func (m *memTarget) WriteAt(_ context.Context, p []byte, off int64) (int, error) {
	if m.fail {
		return 0, errors.New("disk on fire")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return copy(m.data[off:], p), nil
}

func TestRun(t *testing.T) {
	m := &memTarget{data: make([]byte, 1<<20)}
	for _, rw := range []string{"randread", "randwrite", "read", "write"} {
		r, err := Run(context.Background(), m, Options{RW: rw, BS: 4096, QD: 4, Runtime: 50 * time.Millisecond, Size: 1 << 20})
		if err != nil {
			t.Fatal(rw, err)
		}
		if r.Ops == 0 || r.Bytes != r.Ops*4096 || r.Seconds <= 0 || r.IOPS <= 0 || r.Percentiles["50.000000"] == 0 {
			t.Errorf("%s: %+v", rw, r)
		}
	}
	m.fail = true
	if _, err := Run(context.Background(), m, Options{RW: "write", BS: 4096, QD: 2, Runtime: time.Second, Size: 1 << 20}); err == nil {
		t.Error("failing target: no error")
	}
	if _, err := Run(context.Background(), m, Options{RW: "trim", BS: 1, QD: 1, Runtime: 1, Size: 1}); err == nil {
		t.Error("bad pattern accepted")
	}
}

func TestHistogramCap(t *testing.T) {
	h := new(Histogram)
	h.Record(math.MaxUint64)
	if b := bucketOf(math.MaxUint64); b != buckets-1 {
		t.Errorf("huge value in bucket %d of %d", b, buckets)
	}
}
