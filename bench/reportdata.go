package bench

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// reportDataFile keeps a run's whole Report beside report.md, in
// encoding/gob (which, unlike JSON, carries the NaNs that mark what was
// not measured), so that report.md can be drawn again without running
// anything: after the renderer changes, or from several runs merged into
// one (MergeReports; `purerbd-bench render`). A matrix of releases and
// cluster kinds takes hours on a small machine; runs of parts of it, on
// different days, make one report.
const reportDataFile = "report.gob"

// RunPart describes one run a merged report was made from.
type RunPart struct {
	Start              time.Time
	Elapsed            time.Duration
	Reps               int      // its repetitions per contender and case
	Kinds              []string // cluster kinds it booted
	Sections           []string // sections it measured (IDs)
	LoadStart, LoadEnd string
}

// saveData writes the report's data into dir.
func (r *Report) saveData(dir string) error {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(r); err != nil {
		return fmt.Errorf("bench: encoding %s: %w", reportDataFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, reportDataFile), b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// LoadReport reads the report data a run left in dir.
func LoadReport(dir string) (*Report, error) {
	f, err := os.Open(filepath.Join(dir, reportDataFile))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	var r Report
	if err := gob.NewDecoder(f).Decode(&r); err != nil {
		return nil, fmt.Errorf("bench: decoding %s: %w", f.Name(), err)
	}
	return &r, nil
}

// Render writes report.md, the plots, results.csv and the report data
// into dir, as the run that measured r would have (findings.md in dir is
// included).
func (r *Report) Render(dir string) error { return r.write(dir) }

// parts is what r was made from: its own run, or the runs merged into it.
func (r *Report) parts() []RunPart {
	if len(r.Parts) > 0 {
		parts := slices.Clone(r.Parts)
		for i := range parts {
			if parts[i].Reps == 0 { // merged before parts recorded their repetitions
				parts[i].Reps = r.Reps
			}
		}
		return parts
	}
	p := RunPart{Start: r.Machine.Start, Elapsed: r.Elapsed, Reps: r.Reps, Kinds: r.Kinds,
		LoadStart: r.Machine.LoadStart, LoadEnd: r.Machine.LoadEnd}
	for _, s := range r.Sections {
		p.Sections = append(p.Sections, s.ID)
	}
	if r.CSI != nil {
		p.Sections = append(p.Sections, SectionCSI)
	}
	if len(r.KernelVMs) > 0 {
		p.Sections = append(p.Sections, SectionKernelVM)
	}
	if r.Footprint != nil {
		p.Sections = append(p.Sections, SectionFootprint)
	}
	return []RunPart{p}
}

// MergeReports makes one report of several runs' (in the order given):
// their cluster kinds, clusters and sections side by side. A section
// measured on the same cluster kind by more than one run, and the parts
// that run once (CSI, profiles, the kernel VM, the footprint), are taken
// from the last run that has them. The runs must share their mode and
// run time (a report states one method); their repetitions may differ,
// and the report then lists each run's.
func MergeReports(reps []*Report) (*Report, error) {
	if len(reps) == 0 {
		return nil, errors.New("bench: no report to merge")
	}
	first := reps[0]
	m := &Report{Machine: first.Machine, Quick: first.Quick, Reps: first.Reps, Runtime: first.Runtime,
		NBDRuntime: first.NBDRuntime}
	m.Machine.LoadEnd = reps[len(reps)-1].Machine.LoadEnd
	for _, r := range reps {
		if r.Quick != first.Quick || r.Runtime != first.Runtime {
			return nil, fmt.Errorf("bench: runs differ in mode or run time (%s quick=%v against %s quick=%v)",
				r.Runtime, r.Quick, first.Runtime, first.Quick)
		}
		m.Parts = append(m.Parts, r.parts()...)
		if r.Reps != m.Reps {
			m.Reps = 0 // per run: see Parts
		}
		m.Elapsed += r.Elapsed
		for _, k := range r.Kinds {
			if !slices.Contains(m.Kinds, k) {
				m.Kinds = append(m.Kinds, k)
			}
		}
		// a later run's figures replace an earlier one's in place
		for _, c := range r.Clusters {
			if i := slices.IndexFunc(m.Clusters, func(o ClusterInfo) bool { return o.Kind == c.Kind && o.Store == c.Store }); i >= 0 {
				m.Clusters[i] = c
			} else {
				m.Clusters = append(m.Clusters, c)
			}
		}
		for _, s := range r.Sections {
			if i := slices.IndexFunc(m.Sections, func(o *Section) bool {
				return o.baseID() == s.baseID() && o.Cluster == s.Cluster
			}); i >= 0 {
				m.Sections[i] = s
			} else {
				m.Sections = append(m.Sections, s)
			}
		}
		if len(r.Profiles) > 0 {
			m.Profiles = r.Profiles
		}
		if r.CSI != nil {
			m.CSI = r.CSI
		}
		// one kernel-path section per guest kernel: a later run's
		// replaces an earlier one's of the same kernel in place
		for _, k := range r.KernelVMs {
			if i := slices.IndexFunc(m.KernelVMs, func(o *KernelVM) bool { return o.Kernel == k.Kernel }); i >= 0 {
				m.KernelVMs[i] = k
			} else {
				m.KernelVMs = append(m.KernelVMs, k)
			}
		}
		if r.Footprint != nil {
			m.Footprint = r.Footprint
		}
		for _, s := range r.Missing {
			if !slices.Contains(m.Missing, s) {
				m.Missing = append(m.Missing, s)
			}
		}
	}
	if len(m.Kinds) > 1 {
		for _, s := range m.Sections {
			relabel(s)
		}
	}
	// what one run left out and another measured is no longer missing
	m.Missing = slices.DeleteFunc(m.Missing, func(s string) bool {
		k := m.kernelVM()
		return k != nil && k.Skipped == "" && strings.HasPrefix(s, kernelVMMissing)
	})
	return m, nil
}

// relabel marks a section measured by a run of one cluster kind as a run
// of several would have (clusterKind.mark), so that merged kinds' plots
// and rows stay apart.
func relabel(s *Section) {
	if s.Base != "" || s.Cluster == "" {
		return
	}
	release, tuning, ok := strings.Cut(s.Cluster, " ")
	if !ok {
		return
	}
	clusterKind{release, tuning}.mark(s)
}
