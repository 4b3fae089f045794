package bench

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/shorttier"
)

func TestClusterKinds(t *testing.T) {
	c := Config{}.withDefaults()
	if got := c.clusterKinds(); !slices.Equal(got, []clusterKind{{ReleasePacific, Tuned}}) {
		t.Errorf("default kinds %v, want pacific tuned alone", got)
	}
	c.Releases, c.Tunings = []string{ReleaseReef, ReleaseTentacle}, []string{Tuned, Untuned}
	var labels []string
	for _, k := range c.clusterKinds() {
		labels = append(labels, k.label())
	}
	if want := []string{"reef tuned", "reef untuned", "tentacle tuned", "tentacle untuned"}; !slices.Equal(labels, want) {
		t.Errorf("kinds %v, want %v", labels, want)
	}
	if err := c.checkKinds(); err != nil {
		t.Error(err)
	}
	for _, bad := range []Config{{Releases: []string{"quincy"}}, {Tunings: []string{"fast"}}} {
		if err := bad.checkKinds(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestLabelSections checks that a run of one kind keeps the section IDs
// (and so the plots' names) it always had, and that a run of several
// suffixes them while the headline still finds each kind's case.
func TestLabelSections(t *testing.T) {
	one := &suite{cfg: Config{}.withDefaults()}
	sec := &Section{ID: "rbd-cli", Title: "rbd bench CLIs", Short: "rbd bench CLI"}
	one.label(&cluster{kind: clusterKind{ReleasePacific, Tuned}}, sec)
	if sec.ID != "rbd-cli" || sec.Cluster != "pacific tuned" || sec.baseID() != "rbd-cli" {
		t.Errorf("one kind: %+v", sec)
	}
	two := &suite{cfg: Config{Releases: []string{ReleasePacific, ReleaseReef}}.withDefaults()}
	sec = &Section{ID: "rbd-cli", Title: "rbd bench CLIs", Short: "rbd bench CLI"}
	two.label(&cluster{kind: clusterKind{ReleaseReef, Tuned}}, sec)
	if sec.ID != "rbd-cli-reef-tuned" || sec.baseID() != "rbd-cli" || !strings.Contains(sec.Title, "Ceph reef, tuned cluster") {
		t.Errorf("two kinds: %+v", sec)
	}
}

// TestHeadlineKinds checks the headline of a run on several cluster
// kinds: a column per kind, each cell the ratio with both medians and
// their spreads, "not measured" where that kind lacks the case.
func TestHeadlineKinds(t *testing.T) {
	mk := func(kind string, a, p []float64) *Section {
		c := synthCase("4k randwrite QD32", "IOPS", a, p, 1, 2)
		for i := range c.Samples["purerbd"] {
			c.Samples["purerbd"][i].OSDCPU, c.Samples["peer"][i].OSDCPU = 3, 4
		}
		return &Section{ID: "rbd-memstore-" + strings.ReplaceAll(kind, " ", "-"), Base: "rbd-memstore", Cluster: kind,
			Contenders: []string{"purerbd", "peer"}, OSDOf: osdCPUOf, Cases: []*Case{c}}
	}
	r := &Report{Kinds: []string{"pacific tuned", "reef untuned"}, Sections: []*Section{
		mk("pacific tuned", []float64{1300, 1200, 900}, []float64{1000, 800, 1100}),
		mk("reef untuned", []float64{500, 600, 700}, []float64{1000, 1000, 1000}),
	}}
	var b bytes.Buffer
	r.writeHeadline(&b)
	out := b.String()
	for _, want := range []string{
		"| comparison | pacific tuned | reef untuned | target |\n|---|---|---|---|\n",
		"| rbd 4K randwrite QD32 | 1.20×: 1200 (900–1300) / 1000 (800–1100) IOPS | **0.60×**: 600 (500–700) / 1000 (1000–1000) IOPS | ≥ 1.2×: met on 1 of 2 (**not** on reef untuned) |\n",
		"| rbd 4K randwrite QD32 OSD CPU/op | 0.75×: 3.00 (3.00–3.00) / 4.00 (4.00–4.00) OSD CPU s/Mop | 0.75×: 3.00 (3.00–3.00) / 4.00 (4.00–4.00) OSD CPU s/Mop | – |\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	kinds, once, _ := strings.Cut(out, "Measured once per run")
	if strings.Contains(kinds, "rbd 4K randread QD32") {
		t.Errorf("a row no kind measured:\n%s", kinds)
	}
	if strings.Contains(kinds, "nbd-memory") || !strings.Contains(once, "| nbd-memory 4K randread QD32 vs nbdkit | not measured |") {
		t.Errorf("the NBD memory export, which runs on no cluster, is not in the table of what runs once:\n%s", out)
	}
}

// TestQuickReleases runs the quick rbd bench CLI pair on a Reef cluster,
// tuned and untuned, with Reef's own rbd from its root, and checks the
// headline's columns, the OSD CPU per op and the Machine section. About
// a minute once the root is built (rados/radostest/cephcluster/roots).
func TestQuickReleases(t *testing.T) {
	shorttier.Skip(t, "Ceph Reef's root and its daemons")
	if tool := haveTools("go", "chroot", "unshare"); tool != "" {
		t.Fatalf("%s is not installed", tool)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Root: "..", ReportDir: out, WorkDir: filepath.Join(out, "work"), Quick: true,
		Only: []string{SectionRBDCLI}, Releases: []string{ReleaseReef}, Tunings: []string{Tuned, Untuned},
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Clusters) != 2 {
		t.Fatalf("clusters %+v, want reef tuned and untuned", rep.Clusters)
	}
	for _, c := range rep.Clusters {
		if c.Err != "" || !strings.Contains(c.Version, "reef") {
			t.Errorf("cluster %s: version %q, error %q", c.Kind, c.Version, c.Err)
		}
	}
	if len(rep.Sections) != 2 {
		t.Fatalf("%d sections, want the CLI pair twice", len(rep.Sections))
	}
	for _, sec := range rep.Sections {
		if sec.Skipped != "" {
			t.Fatalf("%s skipped: %s", sec.ID, sec.Skipped)
		}
		for _, c := range sec.Cases {
			if len(c.Errors) > 0 {
				t.Errorf("%s %s: failed runs: %v", sec.ID, c.Name, c.Errors)
			}
			for _, who := range sec.Contenders {
				if v := osdCPUPerOp(c, who); !(v > 0) {
					t.Errorf("%s %s %s: OSD CPU per op %v", sec.ID, c.Name, who, v)
				}
			}
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(md)
	for _, want := range []string{
		"| comparison | reef tuned | reef untuned | target |",
		"| memstore | reef untuned | ceph version 18.2",
		"An **untuned** cluster sets back",
		"## rbd bench CLIs (memstore): purerbd rbd bench vs rbd bench — Ceph reef, untuned cluster",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// a ratio in both columns (bold when below target), not "not
	// measured"
	row := regexp.MustCompile(`(?m)^\| rbd bench CLI 4K randwrite t16 \| (\*\*)?[0-9.]+×(\*\*)?: [^|]+ IOPS \| (\*\*)?[0-9.]+×(\*\*)?: [^|]+ IOPS \|`)
	if !row.MatchString(report) {
		t.Errorf("no ratios for the 4K CLI case in both columns")
	}
}
