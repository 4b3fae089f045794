package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/purerbd/purerbd/bench"
)

// runRender is `purerbd-bench render`: report.md drawn again from the
// report data of one or more runs' directories, merged in the order
// given, into -report (whose findings.md is included).
func runRender(args []string) error {
	fs := flag.NewFlagSet("purerbd-bench render", flag.ContinueOnError)
	report := fs.String("report", "bench", "directory for report.md, the plots, results.csv and the merged report data")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("render: name at least one directory holding a run's report data")
	}
	var reps []*bench.Report
	for _, dir := range fs.Args() {
		r, err := bench.LoadReport(dir)
		if err != nil {
			return fmt.Errorf("render: %w", err)
		}
		reps = append(reps, r)
	}
	rep := reps[0]
	if len(reps) > 1 {
		var err error
		if rep, err = bench.MergeReports(reps); err != nil {
			return fmt.Errorf("render: %w", err)
		}
	}
	if err := rep.Render(*report); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	fmt.Printf("wrote %s/report.md from %d run(s)\n", *report, len(fs.Args()))
	return nil
}
