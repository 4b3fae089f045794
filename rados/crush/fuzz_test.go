package crush

import (
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
)

// fuzzWorkBound is the most work (bucket items weighed, see WorkBound)
// one DoRule call of a fuzz target may need: well under a second.
const fuzzWorkBound = 1e6

// FuzzCrushDecode feeds arbitrary bytes to Decode and, for maps that
// decode, runs every rule on a few inputs: neither may panic, and the
// mapper must terminate. Decode may allocate only a bounded multiple of
// its input (alloctest). Seeds (testdata/fuzz/FuzzCrushDecode) are the
// corpus CrushWrapper samples and crushtool-built maps.
func FuzzCrushDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var m *Map
		var err error
		alloctest.Check(t, len(data), func() { m, err = Decode(data) })
		if err != nil {
			return
		}
		weights := make([]uint32, m.MaxDevices%1024)
		for i := range weights {
			weights[i] = uint32(i * 0x4000)
		}
		for r, rule := range m.Rules {
			// Ceph bounds the work only by the map (see WorkBound): map
			// only rules that cannot keep the fuzzer busy for seconds.
			// Seed 746153b7cdd2f337 asks for 3158576 replicas that are
			// all rejected (6-15 s a call).
			if rule == nil || m.WorkBound(r, 5) > fuzzWorkBound {
				continue
			}
			for x := uint32(0); x < 4; x++ {
				out := m.DoRule(r, x, 5, weights, m.ChooseArgsFor(int64(x)))
				if len(out) > 5 {
					t.Fatalf("rule %d returned %d items for 5 wanted", r, len(out))
				}
			}
		}
	})
}
