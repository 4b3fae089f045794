package crush

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/purerbd/purerbd/rados/radostest/corpus"
)

// TestMSRMalformedRules runs MSR rules that Ceph's crush_msr_do_rule
// rejects (mapping to nothing) or could not run (it would loop or crash):
// each maps to nothing with ErrMalformedMSR, and well-formed rules around
// them still map.
func TestMSRMalformedRules(t *testing.T) {
	host := func(id int32, items ...int32) *Bucket {
		w := make([]uint32, len(items))
		for i := range w {
			w[i] = 0x10000
		}
		return &Bucket{ID: id, Type: 1, Alg: AlgStraw2, Items: items, ItemWeights: w, Weight: uint32(len(items)) * 0x10000}
	}
	root := &Bucket{ID: -3, Type: 2, Alg: AlgStraw2, Items: []int32{-1, -2},
		ItemWeights: []uint32{0x20000, 0x20000}, Weight: 0x40000}
	m := &Map{Buckets: []*Bucket{host(-1, 0, 1), host(-2, 2, 3), root}, MaxDevices: 4, Tunables: LegacyTunables()}
	take := Step{Op: OpTake, Arg1: -3}
	emit := Step{Op: OpEmit}
	hosts := Step{Op: OpChooseMSR, Arg1: 2, Arg2: 1}
	osds := Step{Op: OpChooseMSR, Arg1: 1, Arg2: 0}
	malformed := map[string][]Step{
		"no emit":              {take, hosts, osds},
		"take only":            {take},
		"no take":              {hosts, osds, emit},
		"no choosemsr":         {take, emit},
		"take of a device":     {{Op: OpTake, Arg1: 1}, emit},
		"take missing bucket":  {{Op: OpTake, Arg1: -9}, hosts, osds, emit},
		"plain choose":         {take, {Op: OpChooseLeafIndep, Arg1: 2, Arg2: 1}, emit},
		"set step mid-rule":    {take, hosts, {Op: OpSetMSRDescents, Arg1: 3}, osds, emit},
		"negative count":       {take, {Op: OpChooseMSR, Arg1: -2, Arg2: 1}, osds, emit},
		"overflowing product":  {take, {Op: OpChooseMSR, Arg1: 1 << 16, Arg2: 1}, {Op: OpChooseMSR, Arg1: 1 << 16, Arg2: 0}, emit},
		"second block invalid": {take, hosts, osds, emit, take, hosts},
	}
	for name, steps := range malformed {
		for _, typ := range []uint8{RuleTypeMSRFirstN, RuleTypeMSRIndep} {
			m.Rules = []*Rule{{Type: typ, Steps: steps}}
			out, err := m.DoRuleErr(0, 1, 4, []uint32{0x10000, 0x10000, 0x10000, 0x10000}, nil)
			if !errors.Is(err, ErrMalformedMSR) || out != nil {
				t.Errorf("%s (type %d): %v, %v", name, typ, out, err)
			}
			if b := m.WorkBound(0, 4); b != 0 {
				t.Errorf("%s (type %d): work bound %g", name, typ, b)
			}
		}
	}
	weights := []uint32{0x10000, 0x10000, 0x10000, 0x10000}
	for _, tc := range []struct {
		typ   uint8
		steps []Step
		want  int
	}{
		{RuleTypeMSRIndep, []Step{take, hosts, {Op: OpChooseMSR, Arg1: 2}, emit}, 4},
		{RuleTypeMSRFirstN, []Step{take, hosts, osds, emit}, 2},
		// no blocks: msr_indep still returns maxOut holes, as Ceph does
		{RuleTypeMSRIndep, []Step{{Op: OpSetMSRDescents, Arg1: 5}}, 4},
		{RuleTypeMSRFirstN, nil, 0},
	} {
		m.Rules = []*Rule{{Type: tc.typ, Steps: tc.steps}}
		out, err := m.DoRuleErr(0, 7, 4, weights, nil)
		if err != nil || len(out) != tc.want {
			t.Errorf("type %d steps %v: %v, %v; want %d items", tc.typ, tc.steps, out, err, tc.want)
		}
	}
	if out := m.DoRule(5, 1, 3, nil, nil); out != nil {
		t.Fatalf("missing rule mapped to %v", out)
	}
}

// TestDoRuleConcurrent maps from many goroutines at once through uniform
// buckets (the only ones with per-call scratch state); run it with -race.
func TestDoRuleConcurrent(t *testing.T) {
	dir := t.TempDir()
	p := built(12, "host uniform 3 root uniform 0", argonaut)(t, dir)
	raw, err := os.ReadFile(filepath.Join(p))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	w := m.PresentWeights()
	want := make([][]int32, 200)
	for x := range want {
		want[x] = m.DoRule(0, uint32(x), 3, w, nil)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := range want {
				if got := m.DoRule(0, uint32(x), 3, w, nil); !slices.Equal(got, want[x]) {
					t.Errorf("x %d: %v, then %v", x, want[x], got)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkDoRuleStraw2(b *testing.B) {
	raw, err := os.ReadFile(corpus.Files(b, "CrushWrapper")[0])
	if err != nil {
		b.Fatal(err)
	}
	m, err := Decode(raw)
	if err != nil {
		b.Fatal(err)
	}
	w := m.PresentWeights()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m.DoRule(0, uint32(i), 3, w, nil)
	}
}
