package bench

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/bench/internal/guestbench"
)

// TestReportDataRoundTrip saves a report with every part a run can have,
// loads it back and checks that what the renderer reads survived,
// NaNs (not measured) included, and that report.md drawn from the
// loaded data is the one drawn from the original.
func TestReportDataRoundTrip(t *testing.T) {
	c := synthCase("4k randwrite QD32", "IOPS", []float64{1300, 1200, 900}, []float64{1000, 800, 1100}, 1, 2)
	c.Samples["purerbd"][0].OSDCPU = math.NaN()
	c.Samples["purerbd"][1].Lat = &Latency{Percentiles: []float64{50, 99}, Nanos: []float64{1e5, 2e5}}
	r := &Report{
		Machine: Machine{Start: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC), NProc: 2, LoadStart: "1 2 3"},
		Reps:    3, Runtime: 2 * time.Second, Elapsed: time.Minute, Kinds: []string{"pacific tuned"},
		Clusters: []ClusterInfo{{Store: "memstore", Kind: "pacific tuned", Version: "16.2.15"}},
		Sections: []*Section{{ID: "rbd-memstore", Title: "RBD", Cluster: "pacific tuned",
			Contenders: []string{"purerbd", "peer"}, OSDOf: osdCPUOf, Cases: []*Case{c}}},
		CSI:       &ControlPlane{Runs: 2, Calls: []CallTiming{{Call: "CreateSnapshot", Times: []time.Duration{time.Millisecond}}}},
		KernelVMs: []*KernelVM{{Node: &guestbench.NodeRecord{}, Kernel: "6.1"}},
		Footprint: &Footprint{ImageSize: 15e6, Binaries: []Binary{{Name: "purerbd", Size: 1}}},
		Profiles:  []Profile{{Name: "p", CPUTop: "x"}},
		Missing:   []string{"something"},
	}
	dir := t.TempDir()
	if err := r.Render(dir); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s := got.Sections[0].Cases[0].Samples["purerbd"]; !math.IsNaN(s[0].OSDCPU) || s[1].Lat.At(99) != 2e5 {
		t.Errorf("samples after the round trip: %+v", s)
	}
	again := t.TempDir()
	if err := got.Render(again); err != nil {
		t.Fatal(err)
	}
	if out, _ := os.ReadFile(filepath.Join(again, "report.md")); !bytes.Equal(out, want) {
		t.Errorf("report.md drawn from the loaded data differs:\n%s\n--- first:\n%s", out, want)
	}
}

// TestMergeReports merges two runs of one cluster kind each (and a
// later run that measured one of them again) and checks the headline's
// columns, the relabelled sections and the parts the header lists.
func TestMergeReports(t *testing.T) {
	run := func(kind string, start int, a []float64) *Report {
		c := synthCase("4k randwrite QD32", "IOPS", a, []float64{1000, 1000, 1000}, 1, 2)
		return &Report{Machine: Machine{Start: time.Date(2026, 12, 4, start, 0, 0, 0, time.UTC)}, Reps: 3,
			Elapsed: time.Hour, Kinds: []string{kind}, Clusters: []ClusterInfo{{Store: "memstore", Kind: kind}},
			Sections: []*Section{{ID: "rbd-memstore", Title: "RBD", Short: "RBD memstore", Cluster: kind,
				Contenders: []string{"purerbd", "peer"}, Cases: []*Case{c}}}}
	}
	m, err := MergeReports([]*Report{run("pacific tuned", 1, []float64{500, 500, 500}),
		run("reef untuned", 2, []float64{1200, 1200, 1200}), run("pacific tuned", 3, []float64{1300, 1300, 1300})})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Sections) != 2 || len(m.Clusters) != 2 || len(m.Parts) != 3 || m.Elapsed != 3*time.Hour {
		t.Fatalf("merged: %d sections, %d clusters, %d parts, %s", len(m.Sections), len(m.Clusters), len(m.Parts), m.Elapsed)
	}
	for _, s := range m.Sections {
		if want := "rbd-memstore-" + strings.ReplaceAll(s.Cluster, " ", "-"); s.ID != want || s.Base != "rbd-memstore" {
			t.Errorf("section of %s: ID %q base %q", s.Cluster, s.ID, s.Base)
		}
	}
	var b bytes.Buffer
	m.writeHeader(&b)
	out := b.String()
	for _, w := range []string{
		"| comparison | pacific tuned | reef untuned | target |",
		"| rbd 4K randwrite QD32 | 1.30×: 1300 (1300–1300) / 1000 (1000–1000) IOPS | 1.20×: 1200",
		"Merged by `purerbd-bench render` from 3 runs",
		"- 2026-12-04 03:00 UTC, 1h0m0s",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %q in:\n%s", w, out)
		}
	}
	if _, err := MergeReports([]*Report{run("pacific tuned", 1, nil), {Reps: 3, Runtime: time.Second}}); err == nil {
		t.Error("runs of different run times merged")
	}
	// runs of different repetitions merge, and the header says each run's
	later := run("reef untuned", 4, []float64{1200, 1200, 1200, 1200})
	later.Reps = 4
	m, err = MergeReports([]*Report{m, later})
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	m.writeHeader(&b)
	out = b.String()
	for _, w := range []string{
		"- 2026-12-04 03:00 UTC, 1h0m0s, 3 repetitions",
		"- 2026-12-04 04:00 UTC, 1h0m0s, 4 repetitions",
		"as many times each as its run's repetitions above",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %q in:\n%s", w, out)
		}
	}
	if m.Reps != 0 {
		t.Errorf("merged Reps %d, want 0 (per run)", m.Reps)
	}
}

// TestMergeKernelVMs keeps one kernel-path section per guest kernel: a
// later run of the same kernel replaces it, another kernel's is added.
func TestMergeKernelVMs(t *testing.T) {
	run := func(kernel, note string) *Report {
		return &Report{Reps: 6, KernelVMs: []*KernelVM{{Kernel: kernel, Notes: []string{note}}}}
	}
	m, err := MergeReports([]*Report{run("6.1.0-57-amd64", "first"), run("7.2.13-amd64", "sid"),
		run("6.1.0-57-amd64", "again"), {Reps: 6}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range m.KernelVMs {
		got = append(got, k.Kernel+" "+k.Notes[0])
	}
	if want := []string{"6.1.0-57-amd64 again", "7.2.13-amd64 sid"}; !slices.Equal(got, want) {
		t.Errorf("kernel-path sections %q, want %q", got, want)
	}
}
