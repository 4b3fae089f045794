package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// progress prints a long verb's progress on stderr as the rbd tool
// does ("Exporting image: 42% complete...", ending "...done." or
// "...failed."), only when stderr is a terminal and --no-progress was
// not given, so scripts and logs see none of it.
type progress struct {
	w     io.Writer // nil: silent
	label string
	last  int
}

// newProgress returns the progress of label on stderr.
func newProgress(stderr io.Writer, label string, noProgress bool) *progress {
	p := &progress{label: label, last: -1}
	if !noProgress && isTerminal(stderr) {
		p.w = stderr
	}
	return p
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// update reports done of total, printing when the percentage changes.
func (p *progress) update(done, total uint64) {
	if p.w == nil || total == 0 {
		return
	}
	pc := int(min(done, total) * 100 / total)
	if pc != p.last {
		p.last = pc
		fmt.Fprintf(p.w, "\r%s: %d%% complete...", p.label, pc)
	}
}

// finish ends the line: 100% and done, or failed where it stopped.
func (p *progress) finish(err error) {
	if p.w == nil {
		return
	}
	if err != nil {
		fmt.Fprintf(p.w, "\r%s: %d%% complete...failed.\n", p.label, max(p.last, 0))
		return
	}
	fmt.Fprintf(p.w, "\r%s: 100%% complete...done.\n", p.label)
}
