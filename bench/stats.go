package bench

import (
	"math"
	"sort"
)

// Spread summarises repeated measurements of one quantity.
type Spread struct {
	Median, Min, Max float64
	N                int
}

// spreadOf returns the median, min and max of xs, ignoring NaNs. An empty
// input gives N == 0 and NaN values.
func spreadOf(xs []float64) Spread {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	sort.Float64s(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Spread{Median: m, Min: v[0], Max: v[len(v)-1], N: len(v)}
}

// ratio is a/b, NaN when either is unknown or b is zero.
func ratio(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return math.NaN()
	}
	return a / b
}
