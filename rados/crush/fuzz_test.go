package crush

import "testing"

// FuzzCrushDecode feeds arbitrary bytes to Decode and, for maps that
// decode, runs every rule on a few inputs: neither may panic, and the
// mapper must terminate. Seeds (testdata/fuzz/FuzzCrushDecode) are the
// corpus CrushWrapper samples and crushtool-built maps.
func FuzzCrushDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			return
		}
		// Ceph bounds the work only by the tunables; keep fuzzing fast by
		// mapping only maps with modest retry counts.
		tun := m.Tunables
		if tun.ChooseTotalTries > 100 || tun.ChooseLocalTries > 10 || tun.ChooseLocalFallbackTries > 10 ||
			len(m.Buckets) > 64 {
			return
		}
		weights := make([]uint32, m.MaxDevices%1024)
		for i := range weights {
			weights[i] = uint32(i * 0x4000)
		}
		for r, rule := range m.Rules {
			if rule == nil || len(rule.Steps) > 16 {
				continue
			}
			slow := false
			for _, s := range rule.Steps {
				if s.Op >= OpSetChooseTries && s.Op <= OpSetChooseLocalFallback && s.Arg1 > 100 {
					slow = true
				}
				// a choose step's replica count bounds its loop, as in
				// crush_choose_firstn: millions of replicas that are all
				// rejected take minutes, in Ceph too
				switch s.Op {
				case OpChooseFirstN, OpChooseIndep, OpChooseLeafFirstN, OpChooseLeafIndep, OpChooseMSR:
					if s.Arg1 > 64 {
						slow = true
					}
				}
			}
			if slow {
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
