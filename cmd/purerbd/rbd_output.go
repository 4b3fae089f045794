package main

import (
	"encoding/json"
	"io"
	"strings"

	"github.com/purerbd/purerbd/internal/cli"
)

// outputFormat is --format and --pretty-format, as rbd reads them:
// json (or xml, refused here) and plain text; --pretty-format indents
// the JSON as Ceph's pretty formatter does (four spaces).
type outputFormat struct {
	format string
	pretty bool
}

func (f *outputFormat) register(cmd *cli.Command) {
	formatOption(cmd, &f.format)
	cmd.Bool(&f.pretty, "--pretty-format", "indent the JSON output")
}

func (f *outputFormat) json() bool { return f.format == "json" }

// writeJSON writes v as rbd does, followed by a newline.
func (f *outputFormat) writeJSON(w io.Writer, v any) error {
	var b []byte
	var err error
	if f.pretty {
		b, err = json.MarshalIndent(v, "", "    ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// textTable prints rows as Ceph's TextTable does: every column as wide
// as its widest cell, two spaces between columns, headers left-aligned
// (padded too) unless alignHeaders aligns them as their column, cells
// aligned as their column says.
type textTable struct {
	headers      []string
	right        []bool // cells right-aligned
	alignHeaders bool   // headers aligned as their cells (rados df)
	rows         [][]string
}

func (t *textTable) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *textTable) write(w io.Writer) error {
	widths := make([]int, len(t.headers))
	for i, h := range t.headers {
		widths[i] = len(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	var b strings.Builder
	line := func(cells []string, header bool) {
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-len(c))
			if t.right[i] && (!header || t.alignHeaders) {
				b.WriteString(pad + c)
			} else {
				b.WriteString(c + pad)
			}
		}
		b.WriteByte('\n')
	}
	line(t.headers, true)
	for _, r := range t.rows {
		line(r, false)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
