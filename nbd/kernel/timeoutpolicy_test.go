package kernel

import (
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd"
)

var (
	fast      = nbd.ServiceWindow{Longest: 10 * time.Millisecond}
	lingering = nbd.ServiceWindow{Lingering: true}
)

func TestTimeoutPolicyRounds(t *testing.T) {
	p := newTimeoutPolicy(1500*time.Millisecond, 500*time.Millisecond, time.Second)
	if p.min != 2*time.Second || p.max != 2*time.Second || p.timeout() != 2*time.Second {
		t.Fatalf("min %v max %v cur %v, want 2s each", p.min, p.max, p.timeout())
	}
}

// TestTimeoutPolicyRaise: a drop doubles the timeout up to the ceiling,
// and drops sooner than the new timeout after a raise (requests started
// before it, with the old timeout) do not raise it again.
func TestTimeoutPolicyRaise(t *testing.T) {
	p := newTimeoutPolicy(time.Second, 30*time.Second, 5*time.Second)
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at   time.Duration
		want time.Duration
		ok   bool
	}{
		{0, 2 * time.Second, true},
		{500 * time.Millisecond, 2 * time.Second, false}, // the same burst
		{1900 * time.Millisecond, 2 * time.Second, false},
		{2 * time.Second, 4 * time.Second, true},
		{5 * time.Second, 4 * time.Second, false},
		{6 * time.Second, 8 * time.Second, true},
		{14 * time.Second, 16 * time.Second, true},
		{30 * time.Second, 30 * time.Second, true},
		{61 * time.Second, 30 * time.Second, false}, // at the ceiling
	}
	for _, s := range steps {
		got, ok := p.onDrop(t0.Add(s.at))
		if got != s.want || ok != s.ok {
			t.Fatalf("drop at +%v: %v %v, want %v %v", s.at, got, ok, s.want, s.ok)
		}
	}
}

// TestTimeoutPolicyLower: the timeout halves after two calm windows in a
// row, never below the floor; a slow or lingering request resets the count.
func TestTimeoutPolicyLower(t *testing.T) {
	w := 5 * time.Second
	p := newTimeoutPolicy(time.Second, 30*time.Second, w)
	now := time.Unix(1000, 0)
	for p.timeout() < 30*time.Second {
		p.onDrop(now)
		now = now.Add(p.timeout())
	}
	window := func(sw nbd.ServiceWindow) (time.Duration, bool) {
		now = now.Add(w)
		return p.onWindow(now, sw)
	}
	// 7.5 s is a quarter of 30 s: not calm.
	for range 5 {
		if _, ok := window(nbd.ServiceWindow{Longest: 7500 * time.Millisecond}); ok {
			t.Fatal("lowered after windows with a request of a quarter of the timeout")
		}
	}
	if _, ok := window(fast); ok {
		t.Fatal("lowered after one calm window")
	}
	if _, ok := window(lingering); ok {
		t.Fatal("lowered with a request lingering")
	}
	if _, ok := window(fast); ok {
		t.Fatal("lowered after one calm window since the lingering one")
	}
	// The calm windows must span the timeout: 6 of 5 s for 30 s, then 3
	// for 15 s, then 2 (the least) for 8, 4 and 2 s.
	var got []time.Duration
	var after []int
	n := 1 // the calm window above
	for range 30 {
		n++
		if cur, ok := window(fast); ok {
			got = append(got, cur)
			after = append(after, n)
			n = 0
		}
	}
	if want := []int{6, 3, 2, 2, 2}; len(after) != len(want) || after[0] != want[0] || after[1] != want[1] || after[4] != want[4] {
		t.Fatalf("lowered after %v calm windows, want %v", after, want)
	}
	want := []time.Duration{15 * time.Second, 8 * time.Second, 4 * time.Second, 2 * time.Second, time.Second}
	if len(got) != len(want) {
		t.Fatalf("lowered to %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lowered to %v, want %v", got, want)
		}
	}
}

// TestTimeoutPolicyBackoff: a drop soon after a lowering doubles the calm
// windows needed for the next one; long calm at the floor brings the
// need back down.
func TestTimeoutPolicyBackoff(t *testing.T) {
	w := time.Second
	p := newTimeoutPolicy(time.Second, 30*time.Second, w)
	now := time.Unix(1000, 0)
	calmUntilLowered := func() int {
		for n := 1; n < 1000; n++ {
			now = now.Add(w)
			if _, ok := p.onWindow(now, fast); ok {
				return n
			}
		}
		t.Fatal("never lowered")
		return 0
	}
	p.onDrop(now) // 2 s
	if n := calmUntilLowered(); n != 2 {
		t.Fatalf("lowered after %d calm windows, want 2", n)
	}
	for _, want := range []int{4, 8, 16} {
		now = now.Add(w)
		p.onDrop(now) // right after the lowering: premature
		if n := calmUntilLowered(); n != want {
			t.Fatalf("lowered after %d calm windows, want %d", n, want)
		}
	}
	// At the floor, 4×16 calm windows halve the need to 8, and so on.
	for range 4*16 + 4*8 {
		now = now.Add(w)
		p.onWindow(now, fast)
	}
	now = now.Add(time.Hour)
	p.onDrop(now)
	if n := calmUntilLowered(); n != 4 {
		t.Fatalf("after long calm, lowered after %d calm windows, want 4", n)
	}
}
