package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteUsage writes c's usage, as a command line starting at start names
// it: the synopsis, the help text, the commands of a group, and the
// options of c and of every command above it (those of the root in the
// program's usage only: the others point there).
func WriteUsage(w io.Writer, start, c *Command) error {
	p := path(start, c)
	var b strings.Builder
	switch {
	case len(c.subs) > 0:
		fmt.Fprintf(&b, "usage: %s [options] <command> ...\n", p)
	case c.Args != "":
		fmt.Fprintf(&b, "usage: %s [options] %s\n", p, c.Args)
	default:
		fmt.Fprintf(&b, "usage: %s [options]\n", p)
	}
	if text := strings.TrimSpace(c.Help); text != "" {
		fmt.Fprintf(&b, "\n%s\n", text)
	} else if c.Summary != "" {
		fmt.Fprintf(&b, "\n%s\n", upperFirst(c.Summary))
	}
	if len(c.subs) > 0 {
		b.WriteString("\n")
		writeCommands(&b, c)
	}
	chain := c.chain()
	for i := len(chain) - 1; i >= 0; i-- {
		cc := chain[i]
		if len(cc.opts) == 0 {
			continue
		}
		switch {
		case cc == c:
			b.WriteString("\noptions:\n")
		case cc.parent == nil && c != start:
			// the program's usage lists them; every command's would
			// repeat them
			fmt.Fprintf(&b, "\nglobal options: see '%s --help'\n", start.Name)
			continue
		case cc.parent == nil:
			b.WriteString("\nglobal options:\n")
		default:
			fmt.Fprintf(&b, "\noptions of %s:\n", path(start, cc))
		}
		writeOptions(&b, cc.opts)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeCommands lists a group's commands with their summaries.
func writeCommands(w io.Writer, c *Command) {
	fmt.Fprintln(w, "commands:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, s := range c.subs {
		name := s.Name
		if len(s.Aliases) > 0 {
			name += " (" + strings.Join(s.Aliases, ", ") + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, s.Summary)
	}
	tw.Flush()
}

// optionColumn is where option help starts; longer spellings put their
// help on the next line.
const optionColumn = 28

func writeOptions(w io.Writer, opts []*Option) {
	for _, o := range opts {
		help := o.help
		if o.def != "" {
			help += fmt.Sprintf(" (default %s)", o.def)
		}
		if o.required {
			help += " (required)"
		}
		d := "  " + o.display()
		if len(d) < optionColumn-1 {
			fmt.Fprintf(w, "%-*s%s\n", optionColumn, d, help)
		} else {
			fmt.Fprintf(w, "%s\n%*s%s\n", d, optionColumn, "", help)
		}
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
