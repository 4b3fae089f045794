package guestio

import (
	"encoding/json"
	"fmt"
	"time"
)

// Report is what a guest scenario tells the host: how long each step
// took and facts it found, printed as the "RESULT ok <json>" line the
// host test reads ({"timings_s": {...}, "facts": {...}}), or "RESULT
// fail <reason>".
type Report struct {
	Timings map[string]float64
	Facts   map[string]any
}

// NewReport returns an empty report.
func NewReport() *Report {
	return &Report{Timings: map[string]float64{}, Facts: map[string]any{}}
}

// Step runs fn as the named step: it prints the step's start (with the
// guest's uptime, to line up with the kernel log) and duration, records
// the duration, and wraps fn's error with the step's name.
func (r *Report) Step(name string, fn func() error) error {
	fmt.Printf("### [%6.2fs] %s\n", Uptime(), name)
	t := time.Now()
	if err := fn(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	d := time.Since(t).Seconds()
	r.Timings[name] = d
	fmt.Printf("    %s: %.3fs\n", name, d)
	return nil
}

// Finish prints the RESULT line for the scenario's outcome err (after
// the kernel log's tail when it failed) and returns err.
func (r *Report) Finish(err error) error {
	if err != nil {
		fmt.Println("--- dmesg (tail)")
		fmt.Println(DmesgTail(40))
		fmt.Printf("RESULT fail %v\n", err)
		return err
	}
	out, err := json.Marshal(map[string]any{"timings_s": r.Timings, "facts": r.Facts})
	if err != nil {
		fmt.Printf("RESULT fail encoding the report: %v\n", err)
		return err
	}
	fmt.Printf("RESULT ok %s\n", out)
	return nil
}
