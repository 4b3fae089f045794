package alloctest

import "testing"

var sink []byte

// TestMeasure checks that the measurement sees an allocation of the size
// made, and that Check's bound lets a proportional decode pass while an
// amplifying one is over it.
func TestMeasure(t *testing.T) {
	const n = 1 << 20
	got := Measure(0, func() { sink = make([]byte, n) })
	if got < n || got > n+Slack {
		t.Fatalf("an allocation of %d bytes measured %d", n, got)
	}
	if got := Measure(4096, func() { sink = make([]byte, 4096*2) }); got > Limit(4096) {
		t.Fatalf("a decode allocating twice its input measured %d, over the limit %d", got, Limit(4096))
	}
	if got := Measure(4096, func() { sink = make([]byte, Limit(4096)+1) }); got <= Limit(4096) {
		t.Fatalf("an allocation over the limit measured %d", got)
	}
}
