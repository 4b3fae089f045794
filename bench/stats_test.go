package bench

import (
	"math"
	"os"
	"slices"
	"testing"
)

func TestSpread(t *testing.T) {
	s := spreadOf([]float64{5, 1, math.NaN(), 3})
	if s.Median != 3 || s.Min != 1 || s.Max != 5 || s.N != 3 {
		t.Errorf("odd: %+v", s)
	}
	if s := spreadOf([]float64{4, 1, 2, 3}); s.Median != 2.5 {
		t.Errorf("even median %v, want 2.5", s.Median)
	}
	if s := spreadOf(nil); s.N != 0 || !math.IsNaN(s.Median) {
		t.Errorf("empty: %+v", s)
	}
	if r := ratio(1, 0); !math.IsNaN(r) {
		t.Errorf("ratio by zero = %v", r)
	}
}

func TestParseFio(t *testing.T) {
	b, err := os.ReadFile("testdata/fio-nbd-randwrite.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseFio(b, true) // starts with "fio: connected to NBD server"
	if err != nil {
		t.Fatal(err)
	}
	if s.Ops != 19167 || s.Bytes != 78508032 || s.Seconds != 0.301 {
		t.Errorf("ops %d bytes %d seconds %v", s.Ops, s.Bytes, s.Seconds)
	}
	if math.Abs(s.Value-63677.7) > 1 {
		t.Errorf("IOPS %v, want 63677.7", s.Value)
	}
	if p := s.Lat.At(99); math.IsNaN(p) || p <= s.Lat.At(50) {
		t.Errorf("p99 %v p50 %v", p, s.Lat.At(50))
	}
	if !math.IsNaN(s.CPU) {
		t.Error("fio's sample must leave the contender's CPU unmeasured")
	}
	if _, err := parseFio([]byte(`{"jobs":[{"error":5}]}`), true); err == nil {
		t.Error("job error accepted")
	}
}

func TestProcUsage(t *testing.T) {
	u, err := procUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.CPU < 0 {
		t.Errorf("usage %+v", u)
	}
}

func TestSampleRates(t *testing.T) {
	s := Sample{CPU: 2, Ops: 4e6, Bytes: 4 << 30}
	if s.CPUPerMop() != 0.5 || s.CPUPerGiB() != 0.5 {
		t.Errorf("per Mop %v, per GiB %v", s.CPUPerMop(), s.CPUPerGiB())
	}
}

func TestSlugAndNines(t *testing.T) {
	if g := slug("4k randread QD32"); g != "4k-randread-qd32" {
		t.Errorf("slug %q", g)
	}
	if n := nines(99.9); math.Abs(n-3) > 1e-9 {
		t.Errorf("nines(99.9) = %v", n)
	}
}

// TestRunOrderAlternates: who runs first alternates from turn to turn.
func TestRunOrderAlternates(t *testing.T) {
	c := []string{"purerbd", "librbd"}
	for k, want := range [][]string{{"purerbd", "librbd"}, {"librbd", "purerbd"}, {"purerbd", "librbd"}} {
		if got := runOrder(c, k+1); !slices.Equal(got, want) {
			t.Errorf("turn %d: %v, want %v", k+1, got, want)
		}
	}
	if !slices.Equal(c, []string{"purerbd", "librbd"}) {
		t.Errorf("runOrder changed its argument: %v", c)
	}
}
