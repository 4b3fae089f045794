package main

import (
	"encoding/json"
	"io"

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
