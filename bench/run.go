package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Report is everything one run of the suite measured.
type Report struct {
	Machine   Machine
	Quick     bool
	Reps      int
	Runtime   time.Duration
	Elapsed   time.Duration
	Sections  []*Section
	Footprint *Footprint
	Missing   []string // parts of the suite that could not run, and why
}

// suite is the state of one run.
type suite struct {
	cfg  Config
	log  *slog.Logger
	work string
	bins map[string]Binary
}

func (s *suite) bin(name string) string { return s.bins[name].Path }

// Run runs the selected sections and writes report.md and the plots into
// cfg.ReportDir. It fails only when nothing could be measured at all; a
// section that cannot run is reported as skipped, with the reason.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	s := &suite{cfg: cfg, log: cfg.Logger, work: cfg.WorkDir}
	if s.work == "" {
		dir, err := os.MkdirTemp("", "purerbd-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		s.work = dir
	}
	if err := os.MkdirAll(s.work, 0o755); err != nil {
		return nil, err
	}
	t0 := time.Now()
	rep := &Report{Machine: probeMachine(ctx), Quick: cfg.Quick, Reps: cfg.Reps, Runtime: cfg.Runtime}
	s.log.Info("bench: building binaries", "work", s.work)
	bins, err := buildBinaries(ctx, cfg.Root, filepath.Join(s.work, "bin"))
	if err != nil {
		return nil, err
	}
	s.bins = bins

	if cfg.wants(SectionNBD) {
		s.log.Info("bench: NBD memory export vs nbdkit")
		rep.Sections = append(rep.Sections, s.nbdMemory(ctx))
	}
	if cfg.wants(SectionFootprint) {
		rep.Footprint = s.footprint(ctx)
	}
	for _, sec := range rep.Sections {
		if sec.Skipped != "" {
			rep.Missing = append(rep.Missing, fmt.Sprintf("%s: skipped: %s", sec.Title, sec.Skipped))
		}
	}
	rep.Machine.LoadEnd = loadavg()
	rep.Elapsed = time.Since(t0)
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if err := rep.write(cfg.ReportDir); err != nil {
		return rep, err
	}
	return rep, nil
}
