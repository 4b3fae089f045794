package crush

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
)

// fuzzWorkBound is the most work (bucket items weighed, see WorkBound)
// one DoRule call of the fuzz target may need: well under a second.
const fuzzWorkBound = 1_000_000

// FuzzCrushDecode feeds arbitrary bytes to Decode and, for maps that
// decode, runs every rule on a few inputs: neither may panic, and the
// mapper must terminate. Decode may allocate only a bounded multiple of
// its input (alloctest). Seeds (testdata/fuzz/FuzzCrushDecode) are the
// corpus CrushWrapper samples, crushtool-built maps and the MSR maps of
// testdata/msr.
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
		// MSR rules have a priori bounds far above what they spend (a
		// descent is retried msr_collision_tries times only when it
		// collides): they run instead under a budget of work spent.
		msrBudget := fuzzWorkBound
		for r, rule := range m.Rules {
			// The mapper bounds each placement's work (MaxWork), but a
			// map of thousands of rules that each reach the bound would
			// still keep one execution busy for minutes: rules whose
			// bound is high are left to TestMapperBoundsItsWork. Seed
			// 746153b7cdd2f337 asks for 3158576 replicas that are all
			// rejected.
			if rule == nil {
				continue
			}
			msr := isMSR(rule.Type)
			if !msr && m.WorkBound(r, 5) > fuzzWorkBound {
				continue
			}
			for x := uint32(0); x < 4; x++ {
				limit := MaxWork
				if msr {
					if msrBudget <= 0 {
						break
					}
					limit = min(limit, msrBudget)
				}
				out, work, err := m.doRule(r, x, 5, weights, m.ChooseArgsFor(int64(x)), limit)
				if msr {
					msrBudget -= work
				}
				if err != nil && !errors.Is(err, ErrWorkBound) && !errors.Is(err, ErrMalformedMSR) {
					t.Fatalf("rule %d: %v", r, err)
				}
				if len(out) > 5 {
					t.Fatalf("rule %d returned %d items for 5 wanted", r, len(out))
				}
			}
		}
	})
}

// FuzzMSRRule runs MSR rules made of arbitrary steps over the maps of
// testdata/msr: the mapper must not panic, must keep within maxOut, and
// may emit only devices that are in; msr_indep keeps every position.
// Each pair of bytes after the first three is a step: an op among take,
// choosemsr, emit and the set_msr_* steps, and its argument.
func FuzzMSRRule(f *testing.F) {
	var maps []*Map
	for _, name := range []string{"hosts", "racks", "skewed", "uniform"} {
		raw, err := os.ReadFile(filepath.Join(msrTestdata, name+".bin"))
		if err != nil {
			f.Fatal(err)
		}
		m, err := Decode(raw)
		if err != nil {
			f.Fatal(err)
		}
		maps = append(maps, m)
	}
	// map, rule type (even: firstn), maxOut; then steps: take root,
	// choosemsr 2 hosts, choosemsr 2 osds, emit; racks with set_msr_*
	// steps; two blocks
	f.Add([]byte{0, 1, 4, 0, 5, 1, 0x12, 1, 0x02, 2, 0})
	f.Add([]byte{1, 0, 8, 3, 3, 4, 7, 0, 9, 1, 0x22, 1, 0x12, 1, 0x02, 2, 0})
	f.Add([]byte{2, 1, 3, 0, 4, 1, 0x03, 2, 0, 0, 1, 1, 0x01, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		m := maps[int(data[0])%len(maps)]
		typ := uint8(RuleTypeMSRFirstN)
		if data[1]&1 == 1 {
			typ = RuleTypeMSRIndep
		}
		maxOut := int(data[2] % 12)
		var steps []Step
		for i := 3; i+1 < len(data) && len(steps) < 16; i += 2 {
			arg := int32(data[i+1])
			switch data[i] % 5 {
			case 0:
				// take: a bucket (or, rarely, a device) of the map
				steps = append(steps, Step{Op: OpTake, Arg1: -1 - arg%int32(len(m.Buckets)+1)})
			case 1:
				// choosemsr: count in the low nibble, type in the high one
				steps = append(steps, Step{Op: OpChooseMSR, Arg1: arg & 0xf, Arg2: arg >> 4})
			case 2:
				steps = append(steps, Step{Op: OpEmit})
			case 3:
				steps = append(steps, Step{Op: OpSetMSRDescents, Arg1: arg})
			case 4:
				steps = append(steps, Step{Op: OpSetMSRCollisionTries, Arg1: arg})
			}
		}
		mm := *m
		mm.Rules = []*Rule{{Type: typ, Steps: steps}}
		weights := mm.PresentWeights()
		for i := range weights {
			weights[i] = uint32(i%5) * 0x4000 // out, partly in, in
		}
		for x := uint32(0); x < 4; x++ {
			out, _, err := mm.doRule(0, x, maxOut, weights, mm.ChooseArgsFor(0), fuzzWorkBound)
			if err != nil {
				if !errors.Is(err, ErrWorkBound) && !errors.Is(err, ErrMalformedMSR) {
					t.Fatalf("steps %v: %v", steps, err)
				}
				continue
			}
			if len(out) > maxOut || (typ == RuleTypeMSRIndep && len(out) != maxOut) {
				t.Fatalf("steps %v: %d items for %d wanted", steps, len(out), maxOut)
			}
			for _, o := range out {
				if o != ItemNone && (o < 0 || int(o) >= len(weights) || weights[o] == 0) {
					t.Fatalf("steps %v: emitted %d (out or not a device): %v", steps, o, out)
				}
			}
		}
	})
}
