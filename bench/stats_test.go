package bench

import (
	"math"
	"os"
	"slices"
	"strings"
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

// TestRunOrderAlternates: over a case's repetitions who runs first goes
// A B B A A B B A (each pair of repetitions balanced, and the earlier
// repetition of a pair not always the same contender's), and the next
// case starts the other way round.
func TestRunOrderAlternates(t *testing.T) {
	c := []string{"purerbd", "librbd"}
	first := func(rep, i int) string { return runOrder(c, rep, i)[0] }
	var got []string
	for rep := 1; rep <= 8; rep++ {
		got = append(got, first(rep, 0)[:1])
	}
	if g := strings.Join(got, ""); g != "pllppllp" {
		t.Errorf("case 0, reps 1-8: first %s, want pllppllp", g)
	}
	for rep := 1; rep <= 8; rep++ {
		if first(rep, 0) == first(rep, 1) {
			t.Errorf("rep %d: cases 0 and 1 both start with %s", rep, first(rep, 0))
		}
	}
	for _, reps := range []int{2, 4, 6, 8, 10} {
		for i := range 3 {
			n := 0
			for rep := 1; rep <= reps; rep++ {
				if first(rep, i) == "purerbd" {
					n++
				}
			}
			if n*2 != reps {
				t.Errorf("%d reps, case %d: purerbd first %d times", reps, i, n)
			}
		}
	}
	if !slices.Equal(c, []string{"purerbd", "librbd"}) {
		t.Errorf("runOrder changed its argument: %v", c)
	}
}
