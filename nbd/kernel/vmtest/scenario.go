package vmtest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
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
