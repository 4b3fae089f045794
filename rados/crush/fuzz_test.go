package crush

import (
	"errors"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
)

// fuzzWorkBound is the most work (bucket items weighed, see WorkBound)
// one DoRule call of the fuzz target may need: well under a second.
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
			// The mapper bounds each placement's work (MaxWork), but a
			// map of thousands of rules that each reach the bound would
			// still keep one execution busy for minutes: rules whose
			// bound is high are left to TestMapperBoundsItsWork. Seed
			// 746153b7cdd2f337 asks for 3158576 replicas that are all
			// rejected.
			if rule == nil || m.WorkBound(r, 5) > fuzzWorkBound {
				continue
			}
			for x := uint32(0); x < 4; x++ {
				out, err := m.DoRuleErr(r, x, 5, weights, m.ChooseArgsFor(int64(x)))
				if err != nil && !errors.Is(err, ErrWorkBound) && !errors.Is(err, ErrMSRUnsupported) {
					t.Fatalf("rule %d: %v", r, err)
				}
				if len(out) > 5 {
					t.Fatalf("rule %d returned %d items for 5 wanted", r, len(out))
				}
			}
		}
	})
}
