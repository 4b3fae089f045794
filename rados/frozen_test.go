package rados

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/purerbd/purerbd/rados/crc32c"
)

// TestFrozenChecksum checks the cached sums against crc32c over many
// ranges, from concurrent goroutines (-race), past the cache's bound.
func TestFrozenChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	f := Freeze(b)
	if &f.Bytes()[0] != &b[0] {
		t.Fatal("Bytes does not return the frozen buffer")
	}
	type rng struct{ off, n int }
	ranges := make([]rng, 3*maxFrozenSums)
	for i := range ranges {
		n := 1 + r.IntN(len(b)-1)
		ranges[i] = rng{r.IntN(len(b) - n), n}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for k := range 2 * len(ranges) { // each range twice: computed, then cached
				x := ranges[(k+g*7)%len(ranges)]
				if got, want := f.Checksum(x.off, x.n), crc32c.Checksum(b[x.off:x.off+x.n]); got != want {
					t.Errorf("Checksum(%d, %d) = %#x, want %#x", x.off, x.n, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(f.sums) != maxFrozenSums {
		t.Errorf("%d sums kept, want the bound %d", len(f.sums), maxFrozenSums)
	}
}
