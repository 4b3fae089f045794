package vmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// Scenario is what a guest scenario reports on its one result line,
// "RESULT ok <json>": how long each step took and what it observed.
type Scenario struct {
	Timings map[string]float64 `json:"timings_s"`
	Facts   map[string]any     `json:"facts"`
}

// Scenario reads the run's result line. An error says why the run does
// not count as a passed scenario: no result line or more than one, a
// "RESULT fail ..." line, or a line that does not decode.
func (r *Result) Scenario() (*Scenario, error) {
	results := r.Lines("RESULT ")
	if len(results) != 1 {
		return nil, fmt.Errorf("%d result lines, want 1", len(results))
	}
	rest, ok := strings.CutPrefix(results[0], "ok ")
	if !ok {
		return nil, fmt.Errorf("the guest reported %q", results[0])
	}
	var s Scenario
	if err := json.Unmarshal([]byte(rest), &s); err != nil {
		return nil, fmt.Errorf("result line %q: %w", results[0], err)
	}
	return &s, nil
}

// Log writes the step timings, in name order, and the facts to the test
// log.
func (s *Scenario) Log(tb testing.TB) {
	tb.Helper()
	names := make([]string, 0, len(s.Timings))
	width := 0
	for n := range s.Timings {
		names = append(names, n)
		width = max(width, len(n))
	}
	sort.Strings(names)
	for _, n := range names {
		tb.Logf("  %-*s %7.3fs", width, n, s.Timings[n])
	}
	tb.Logf("  facts: %v", s.Facts)
}

// RunScenario boots the VM cfg describes, fails tb unless the guest
// scenario passed, logs its figures (and the console with NBD_VM_CONSOLE
// set) and returns them.
func RunScenario(tb testing.TB, h Host, cfg Config) *Scenario {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout+time.Minute+StallRoom)
	defer cancel()
	var out strings.Builder
	cfg.Output = &out
	res, err := Run(ctx, tb, h, cfg)
	if res == nil {
		tb.Fatal(err)
	}
	sc, serr := res.Scenario()
	if err != nil || res.ExitCode != 0 || serr != nil {
		tb.Fatalf("guest scenario failed (err %v, exit %d, %v); console:\n%s", err, res.ExitCode, serr, res.Console)
	}
	tb.Logf("VM: boot to init %.2fs, whole run %.1fs (wall)", res.Boot.Seconds(), res.Wall.Seconds())
	sc.Log(tb)
	if os.Getenv("NBD_VM_CONSOLE") != "" {
		tb.Logf("console:\n%s", res.Console)
	}
	return sc
}
