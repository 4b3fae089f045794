package loadgen

import (
	"math/bits"
	"strconv"
	"sync/atomic"
)

// subBits is the number of mantissa bits kept per power of two: values
// are recorded with a relative error below 2^-subBits.
const subBits = 6

const (
	subCount = 1 << subBits
	// maxValue caps what is recorded: 2^40 ns is over 18 minutes.
	maxValue = 1<<40 - 1
	buckets  = (40-subBits)*subCount + subCount
)

// Histogram counts values (nanoseconds) in log-linear buckets. Its zero
// value is empty and ready, and it is safe for concurrent use (the
// counters are atomic: one small histogram for all workers).
type Histogram struct {
	counts [buckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64
	max    atomic.Uint64
}

func bucketOf(v uint64) int {
	v = min(v, maxValue)
	if v < subCount {
		return int(v)
	}
	e := bits.Len64(v) - subBits - 1 // v >> e is in [subCount, 2*subCount)
	return (e+1)*subCount + int(v>>e) - subCount
}

// lowest returns the smallest value of bucket i, and its width.
func lowest(i int) (uint64, uint64) {
	if i < subCount {
		return uint64(i), 1
	}
	e := i/subCount - 1
	m := uint64(i%subCount + subCount)
	return m << e, 1 << e
}

// Record adds one value.
func (h *Histogram) Record(v uint64) {
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(v)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n.Load() }

// Mean is the average value (0 when empty).
func (h *Histogram) Mean() float64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return float64(h.sum.Load()) / float64(n)
}

// Percentile returns the value at or below which p percent of the values
// lie (the midpoint of its bucket; the maximum for p = 100).
//
// It is meant for a histogram no longer recorded into.
func (h *Histogram) Percentile(p float64) uint64 {
	n, hi := h.n.Load(), h.max.Load()
	if n == 0 {
		return 0
	}
	if p >= 100 {
		return hi
	}
	rank := min(uint64(p/100*float64(n)), n-1)
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen > rank {
			lo, w := lowest(i)
			return min(lo+w/2, hi)
		}
	}
	return hi
}

// fioPercentiles are the percentiles fio reports by default.
func fioPercentiles() []float64 {
	return []float64{1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99}
}

// Percentiles returns fio's default percentiles as fio's JSON keys them
// ("99.900000") with values in nanoseconds.
func (h *Histogram) Percentiles() map[string]uint64 {
	ps := fioPercentiles()
	m := make(map[string]uint64, len(ps))
	for _, p := range ps {
		m[strconv.FormatFloat(p, 'f', 6, 64)] = h.Percentile(p)
	}
	return m
}
