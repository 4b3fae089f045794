package main

import (
	"math"
	"testing"
	"time"
)

// TestBenchStats checks the running figures against the definitions.
func TestBenchStats(t *testing.T) {
	var st benchStats
	if n, mean, sd, minL, maxL, last := st.snapshot(); n != 0 || mean != 0 || sd != 0 || minL != 0 || maxL != 0 || last != 0 {
		t.Fatalf("empty: %d %v %v %v %v %v", n, mean, sd, minL, maxL, last)
	}
	lats := []time.Duration{3 * time.Millisecond, time.Millisecond, 5 * time.Millisecond, 2 * time.Millisecond}
	for _, d := range lats {
		st.record(d, 4096)
	}
	n, mean, sd, minL, maxL, last := st.snapshot()
	// mean 2.75 ms; deviations 0.25 1.75 2.25 0.75 ms: variance 2.1875 ms²
	if n != 4 || math.Abs(mean-0.00275) > 1e-12 || math.Abs(sd-math.Sqrt(2.1875e-6)) > 1e-9 {
		t.Errorf("n %d mean %v sd %v", n, mean, sd)
	}
	if minL != time.Millisecond || maxL != 5*time.Millisecond || last != 2*time.Millisecond {
		t.Errorf("min %v max %v last %v", minL, maxL, last)
	}
	if st.bytesDone.Load() != 4*4096 || st.finished.Load() != 4 {
		t.Errorf("bytes %d finished %d", st.bytesDone.Load(), st.finished.Load())
	}
}
