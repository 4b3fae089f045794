package crush

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fuzzSeed reads a one-[]byte seed of a fuzz target.
func fuzzSeed(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	if len(lines) < 2 || lines[0] != "go test fuzz v1" {
		t.Fatalf("%s: not a fuzz seed", path)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}

// TestWorkBound checks that the bound lets the fuzz target map every
// rule of the ordinary seeds (each mapping quickly), and keeps it from
// the rule that asks for millions of replicas; for the MSR rules of the
// seeds, that it is above the work they spend.
func TestWorkBound(t *testing.T) {
	const hostile = "746153b7cdd2f337"
	files, err := filepath.Glob("testdata/fuzz/FuzzCrushDecode/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no seeds: %v", err)
	}
	rules, msrRules := 0, 0
	for _, f := range files {
		m, err := Decode(fuzzSeed(t, f))
		if err != nil {
			continue
		}
		for r, rule := range m.Rules {
			if rule == nil {
				continue
			}
			b := m.WorkBound(r, 5)
			if isMSR(rule.Type) {
				// The fuzz target runs MSR rules under a budget of work
				// spent; their bound must still hold what they spend.
				for _, w := range [][]uint32{nil, m.PresentWeights()} {
					for x := uint32(0); x < 8; x++ {
						_, work, _ := m.doRule(r, x, 5, w, nil, MaxWork)
						if float64(work) > b || (work == 0) != (b == 0) {
							t.Errorf("%s rule %d input %d: work %d, bound %.3g", filepath.Base(f), r, x, work, b)
						}
					}
				}
				msrRules++
				continue
			}
			if filepath.Base(f) == hostile {
				if b < 1e9 {
					t.Errorf("%s rule %d: bound %.3g for 3158576 rejected replicas", hostile, r, b)
				}
				continue
			}
			if b > fuzzWorkBound {
				t.Errorf("%s rule %d: bound %.3g, beyond the fuzz target's %.3g", filepath.Base(f), r, b, float64(fuzzWorkBound))
			}
			t0 := time.Now()
			m.DoRule(r, 1, 5, nil, nil) // every device out: every try rejected
			if d := time.Since(t0); d > time.Second {
				t.Errorf("%s rule %d: bound %.3g but mapping took %v", filepath.Base(f), r, b, d)
			}
			rules++
		}
	}
	if rules < 10 || msrRules < 10 {
		t.Errorf("only %d rules and %d MSR rules bounded", rules, msrRules)
	}
	if (&Map{}).WorkBound(0, 5) != 0 {
		t.Error("a rule that does not exist costs something")
	}
}

// TestMapperBoundsItsWork maps the seed whose rule asks for 3158576
// replicas that are all rejected: Ceph's mapper (and this one before it
// counted its work) spent seconds on each input; now each mapping gives
// up after MaxWork items and says so (issue 22, item 6).
func TestMapperBoundsItsWork(t *testing.T) {
	m, err := Decode(fuzzSeed(t, "testdata/fuzz/FuzzCrushDecode/746153b7cdd2f337"))
	if err != nil {
		t.Fatal(err)
	}
	bounded := 0
	for r, rule := range m.Rules {
		if rule == nil {
			continue
		}
		for x := uint32(0); x < 3; x++ {
			t0 := time.Now()
			_, err := m.DoRuleErr(r, x, 5, nil, nil) // every device out: every try rejected
			if d := time.Since(t0); d > 2*time.Second {
				t.Fatalf("rule %d input %d: mapping took %v", r, x, d)
			}
			if errors.Is(err, ErrWorkBound) {
				bounded++
			}
		}
	}
	if bounded == 0 {
		t.Fatal("no mapping reached the work bound")
	}
}
