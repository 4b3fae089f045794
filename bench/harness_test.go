package bench

import (
	"context"
	"encoding/csv"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestQuickNBD runs the quick mode's NBD section end to end (building the
// binaries, starting purerbd's server and nbdkit, fio and nbdcopy) and
// checks that the report holds a median and a ratio for every case. It
// checks the harness, not the timings.
func TestQuickNBD(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries and runs fio for about a minute")
	}
	if tool := haveTools("go", "fio", "nbdkit", "nbdcopy"); tool != "" {
		t.Fatalf("%s is not installed: run make deps (a test that needs a tool fails without it)", tool)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Root: "..", ReportDir: out, WorkDir: filepath.Join(out, "work"),
		Quick: true, Only: []string{SectionNBD}, Runtime: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sections) != 1 || rep.Sections[0].Skipped != "" {
		t.Fatalf("NBD section did not run: %+v", rep.Missing)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(md)
	for _, c := range rep.Sections[0].Cases {
		if len(c.Errors) > 0 {
			t.Errorf("%s: failed runs: %v", c.Name, c.Errors)
		}
		// | case | unit | purerbd median (min–max) | nbdkit ... | ratio |
		row := regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(c.Name) + ` \| (IOPS|MiB/s) \| [0-9.]+ \([0-9.]+–[0-9.]+\) \| [0-9.]+ \([0-9.]+–[0-9.]+\) \| \**[0-9]+\.[0-9]{2}\** \|$`)
		if !row.MatchString(report) {
			t.Errorf("no row with medians and a ratio for %q in the report", c.Name)
		}
	}
	for _, want := range []string{"## Machine", "## Summary", "load avg", "Peak RSS", "![4k randread against queue depth](nbd-memory-4k-randread.svg)"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, svg := range []string{"nbd-memory-4k-randread.svg", "nbd-memory-4k-randwrite.svg", "nbd-memory-ratio.svg",
		"nbd-memory-lat-4k-randread-qd32.svg"} {
		if b, err := os.ReadFile(filepath.Join(out, svg)); err != nil || !strings.HasPrefix(string(b), "<svg") {
			t.Errorf("plot %s: %v", svg, err)
		}
	}
	rows := readCSV(t, filepath.Join(out, "results.csv"))
	if want := 1 + 2*rep.Reps*len(rep.Sections[0].Cases); len(rows) != want {
		t.Errorf("results.csv has %d rows, want %d", len(rows), want)
	}
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// readCSV returns the rows of the CSV file at path.
func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
