package bench

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	// a ceph-osd line (fields 14 and 15: utime 12345, stime 678 ticks),
	// and one whose command name holds spaces and a ')'
	for _, c := range []struct {
		stat string
		want float64
	}{
		{"4242 (ceph-osd) S 1 4242 4242 0 -1 4194560 1000 0 0 0 12345 678 0 0 20 0 60 0 100 1000 100 0", 130.23},
		{"7 (a b) c) R 1 7 7 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 100 1000 100 0", 0.1},
	} {
		got, err := parseStatCPU([]byte(c.stat))
		if err != nil || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("parseStatCPU(%q) = %v, %v; want %v", c.stat, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "4242 ceph-osd S 1", "4242 (ceph-osd) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 x 5 0"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q): no error", bad)
		}
	}
}

func TestProcCPUOfSelf(t *testing.T) {
	if _, err := procCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

func TestOSDCPUPerOp(t *testing.T) {
	s := Sample{Ops: 500_000, CPU: 1, OSDCPU: 2}
	if got := s.OSDCPUPerMop(); got != 4 {
		t.Errorf("OSDCPUPerMop = %v, want 4", got)
	}
	if got := s.TotalCPUPerMop(); got != 6 {
		t.Errorf("TotalCPUPerMop = %v, want 6", got)
	}
	if got := (Sample{OSDCPU: 1}).OSDCPUPerMop(); !math.IsNaN(got) {
		t.Errorf("no ops: OSDCPUPerMop = %v, want NaN", got)
	}
	if got := (Sample{Ops: 1, OSDCPU: math.NaN()}).OSDCPUPerMop(); !math.IsNaN(got) {
		t.Errorf("not read: OSDCPUPerMop = %v, want NaN", got)
	}
}

// TestMeasureOSD checks that a run's sample gets what the OSDs spent
// between the readings around it, and NaN when a reading fails.
func TestMeasureOSD(t *testing.T) {
	readings := []float64{10, 12.5}
	sec := &Section{ID: "x", osd: func() (float64, error) {
		v := readings[0]
		readings = readings[1:]
		return v, nil
	}}
	smp, err := sec.measure(slog.New(slog.DiscardHandler), func() (Sample, error) { return Sample{Ops: 1e6}, nil })
	if err != nil || smp.OSDCPU != 2.5 || smp.OSDCPUPerMop() != 2.5 {
		t.Errorf("measure: %+v, %v; want OSDCPU 2.5", smp, err)
	}
	sec.osd = func() (float64, error) { return 0, os.ErrNotExist }
	if smp, _ := sec.measure(slog.New(slog.DiscardHandler), func() (Sample, error) { return Sample{Ops: 1}, nil }); !math.IsNaN(smp.OSDCPU) {
		t.Errorf("failed reading: OSDCPU %v, want NaN", smp.OSDCPU)
	}
}

// TestOSDCPUInReport checks the section's OSD table, the summary's
// column and results.csv's osd_cpu_s.
func TestOSDCPUInReport(t *testing.T) {
	c := synthCase("4k randwrite QD32", "IOPS", []float64{1000, 1000, 1000}, []float64{1000, 1000, 1000}, 1, 2)
	for i := range c.Samples["purerbd"] {
		c.Samples["purerbd"][i].OSDCPU = 6 + float64(i) // 6, 7, 8 s/Mop: median 7
		c.Samples["peer"][i].OSDCPU = 4                 // 4 s/Mop
	}
	sec := &Section{ID: "rbd-memstore", Title: "RBD", Short: "RBD memstore", Cluster: "pacific tuned",
		Contenders: []string{"purerbd", "peer"}, Cases: []*Case{c}, OSDOf: osdCPUOf}
	r := &Report{Sections: []*Section{sec}}
	var b bytes.Buffer
	writeSection(&b, sec, nil)
	r.writeSummary(&b)
	out := b.String()
	for _, want := range []string{
		"| case | OSD purerbd | OSD peer | OSD ratio | OSD purerbd min–max | OSD peer min–max | client + OSD purerbd | client + OSD peer | ratio |",
		"| 4k randwrite QD32 | 7.00 | 4.00 | **1.75** | 6.00–8.00 | 4.00–4.00 | 8.00 | 6.00 | **1.33** |",
		"| OSD CPU/op ratio |",
		"| RBD memstore | 4k randwrite QD32 | IOPS | 1000 | 1000 (peer) | 1.00 | **0.50** | **1.75** |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	dir := t.TempDir()
	if err := r.writeCSV(filepath.Join(dir, "results.csv")); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, filepath.Join(dir, "results.csv"))
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	osd, okOSD := col["osd_cpu_s"]
	cluster, okCluster := col["cluster"]
	if !okOSD || !okCluster {
		t.Fatalf("header %v", rows[0])
	}
	if r := rows[1]; r[osd] != "6" || r[cluster] != "pacific tuned" {
		t.Errorf("first run %v: want osd_cpu_s 6 and the cluster", r)
	}
	if r := rows[1]; r[col["guest_cpu_s"]] != "" || r[col["server_ctxt"]] != "" {
		t.Errorf("first run %v: a section outside the VM has no guest figures", r)
	}
}
