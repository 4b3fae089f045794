package maxprocs

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestSizerNext: the count doubles at once when the Ps are nearly always
// busy, never past max, and drops by one only after shrinkAfter intervals
// in a row in which one P fewer would have carried the load; an interval
// between the two thresholds starts the count of low ones over.
func TestSizerNext(t *testing.T) {
	s := &sizer{max: 6}
	steps := []struct {
		cur  int
		used float64
		want int
	}{
		{1, 0.5, 1}, // one P, half busy
		{1, 0.9, 2}, // saturated: double
		{2, 1.9, 4}, // again
		{4, 3.9, 6}, // capped at max
		{6, 5.9, 6}, // at max
		{6, 3.0, 6}, // low 1
		{6, 3.0, 6}, // low 2
		{6, 4.5, 6}, // between: starts over
		{6, 3.0, 6}, // low 1
		{6, 3.0, 6}, // low 2
		{6, 3.0, 6}, // low 3
		{6, 3.0, 5}, // low 4: one fewer
		{5, 0.1, 5}, // the count starts again at the new size
		{5, 0.1, 5},
		{5, 0.1, 5},
		{5, 0.1, 4},
		{2, 0.79, 2}, // 0.79 < 0.8 of one P: low 1
		{2, 0.79, 2},
		{2, 0.79, 2},
		{2, 0.79, 1},
		{1, 0.0, 1}, // never below one
		{1, 0.0, 1},
		{1, 0.0, 1},
		{1, 0.0, 1},
		{1, 0.0, 1},
	}
	for i, st := range steps {
		if got := s.next(st.cur, st.used); got != st.want {
			t.Fatalf("step %d: next(%d, %.2f) = %d, want %d", i, st.cur, st.used, got, st.want)
		}
	}
}

// TestRunShrinksIdleAndRestores: an idle process comes down to one P, and
// the starting count is back once Run returns.
func TestRunShrinksIdleAndRestores(t *testing.T) {
	t.Setenv("GOMAXPROCS", "") // Run must not see an operator's choice
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Run(ctx, Config{Interval: 10 * time.Millisecond}); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.GOMAXPROCS(0) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("GOMAXPROCS still %d after 10 s idle", runtime.GOMAXPROCS(0))
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Fatalf("GOMAXPROCS %d after Run returned, want the starting 3", n)
	}
}

// TestRunLeavesExplicitSetting: with GOMAXPROCS in the environment Run
// changes nothing and returns at once.
func TestRunLeavesExplicitSetting(t *testing.T) {
	t.Setenv("GOMAXPROCS", "3")
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	done := make(chan struct{})
	go func() { Run(context.Background(), Config{Interval: time.Millisecond}); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return with GOMAXPROCS set")
	}
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Fatalf("GOMAXPROCS %d, want 3", n)
	}
}
