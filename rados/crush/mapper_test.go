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

func TestMSRRulesRefused(t *testing.T) {
	m := &Map{Rules: []*Rule{{Type: RuleTypeMSRIndep, Steps: []Step{{Op: OpChooseMSR}}}}}
	if _, err := m.DoRuleErr(0, 1, 3, nil, nil); !errors.Is(err, ErrMSRUnsupported) {
		t.Fatalf("MSR rule: %v", err)
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
