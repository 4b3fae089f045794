package rbd

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestIntervals checks the interval set against a bitmap under random
// inserts and erases: the set must hold exactly the bitmap's runs.
func TestIntervals(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 200
	for round := 0; round < 200; round++ {
		var s intervals
		var bits [n]bool
		for op := 0; op < 20; op++ {
			off := uint64(r.IntN(n))
			l := min(uint64(r.IntN(30)), n-off)
			set := r.IntN(3) != 0
			if set {
				s.insert(off, l)
			} else {
				s.erase(off, l)
			}
			for i := off; i < off+l; i++ {
				bits[i] = set
			}
			var want []ival
			for i := 0; i < n; i++ {
				if !bits[i] {
					continue
				}
				if k := len(want); k > 0 && want[k-1].end() == uint64(i) {
					want[k-1].len++
				} else {
					want = append(want, ival{uint64(i), 1})
				}
			}
			if fmt.Sprint(want) != fmt.Sprint([]ival(s)) {
				t.Fatalf("round %d op %d: set %v, want %v", round, op, s, want)
			}
			lo, m := uint64(r.IntN(n)), uint64(r.IntN(50))
			var wantX []ival
			for _, iv := range want {
				if a, b := max(iv.off, lo), min(iv.end(), lo+m); a < b {
					wantX = append(wantX, ival{a, b - a})
				}
			}
			if got := s.intersect(lo, m); fmt.Sprint([]ival(got)) != fmt.Sprint(wantX) {
				t.Fatalf("intersect(%d, %d) of %v = %v, want %v", lo, m, s, got, wantX)
			}
		}
	}
}
