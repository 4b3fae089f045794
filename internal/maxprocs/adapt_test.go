package maxprocs

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestSizerNext: the count follows a rising demand at once, never past
// max nor below one, and a falling one only after shrinkAfter samples
// in a row asked for fewer; a sample at the current count starts that
// over.
func TestSizerNext(t *testing.T) {
	s := &sizer{max: 6}
	steps := []struct{ cur, demand, want int }{
		{1, 0, 1}, // no connection: one P
		{1, 1, 1},
		{1, 3, 3}, // at once
		{3, 9, 6}, // capped at max
		{6, 6, 6},
		{6, 2, 6}, // low 1
		{6, 2, 6}, // low 2
		{6, 6, 6}, // back up: starts over
		{6, 2, 6}, // low 1
		{6, 2, 6}, // low 2
		{6, 4, 6}, // low 3 (any count below)
		{6, 2, 2}, // low 4: down to the demand
		{2, 0, 2},
		{2, 0, 2},
		{2, 0, 2},
		{2, 0, 1}, // never below one
		{1, 0, 1},
	}
	for i, st := range steps {
		if got := s.next(st.cur, st.demand); got != st.want {
			t.Fatalf("step %d: next(%d, %d) = %d, want %d", i, st.cur, st.demand, got, st.want)
		}
	}
}

// TestRunFollowsDemand: GOMAXPROCS follows the demand reported, and the
// starting count is back once Run returns.
func TestRunFollowsDemand(t *testing.T) {
	t.Setenv("GOMAXPROCS", "") // Run must not see an operator's choice
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	var demand atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Run(ctx, Config{Demand: func() int { return int(demand.Load()) }, Interval: time.Millisecond})
		close(done)
	}()
	await := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for runtime.GOMAXPROCS(0) != want {
			if time.Now().After(deadline) {
				t.Fatalf("GOMAXPROCS %d after 10 s, want %d", runtime.GOMAXPROCS(0), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	await(1)
	demand.Store(2)
	await(2)
	demand.Store(7)
	await(3) // the starting count is the most
	demand.Store(0)
	await(1)
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
	go func() {
		Run(context.Background(), Config{Demand: func() int { return 1 }, Interval: time.Millisecond})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return with GOMAXPROCS set")
	}
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Fatalf("GOMAXPROCS %d, want 3", n)
	}
}
