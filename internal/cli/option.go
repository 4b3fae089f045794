package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Option is one option a command declares. The binding methods of
// Command (String, Bool, Int, ...) make them.
type Option struct {
	names    []string // "-p", "--pool": long names with dashes only
	metas    []string // its values' names; none for a switch
	help     string
	def      string // default shown in the usage
	required bool
	set      func(vals []string) error
}

// Required marks the option as one the command cannot run without.
func (o *Option) Required() *Option {
	o.required = true
	return o
}

// Names returns the option's spellings ("-p", "--pool").
func (o *Option) Names() []string { return o.names }

// IsSwitch reports whether the option takes no value (--force; --force=false).
func (o *Option) IsSwitch() bool { return len(o.metas) == 0 }

// has reports whether name (normalised) is one of o's spellings.
func (o *Option) has(name string) bool { return slices.Contains(o.names, name) }

// display is how the usage and messages show the option: "-p, --pool POOL".
func (o *Option) display() string {
	s := strings.Join(o.names, ", ")
	if len(o.metas) > 0 {
		s += " " + strings.Join(o.metas, " ")
	}
	return s
}

// name is the option's main spelling in messages: its first long name.
func (o *Option) name() string {
	for _, n := range o.names {
		if strings.HasPrefix(n, "--") {
			return n
		}
	}
	return o.names[0]
}

// normalize spells a long option name as the tree declares it: Ceph's
// tools take _ and - alike in option names.
func normalize(name string) string {
	if strings.HasPrefix(name, "--") {
		return "--" + strings.ReplaceAll(name[2:], "_", "-")
	}
	return name
}

// parseSpec reads "-p, --pool POOL": comma-separated spellings, then the
// names of the values (none for a switch). A malformed spec is a bug in
// the program: it panics.
func parseSpec(spec string) (names, metas []string) {
	for _, f := range strings.Fields(spec) {
		n := strings.TrimSuffix(f, ",")
		switch {
		case strings.HasPrefix(n, "--") && len(n) > 2 && len(metas) == 0:
			names = append(names, normalize(n))
		case strings.HasPrefix(n, "-") && len(n) == 2 && n != "--" && len(metas) == 0:
			names = append(names, n)
		case !strings.HasPrefix(n, "-") && n == f:
			metas = append(metas, n)
		default:
			panic(fmt.Sprintf("cli: bad option spec %q", spec))
		}
	}
	if len(names) == 0 {
		panic(fmt.Sprintf("cli: option spec %q has no name", spec))
	}
	for _, n := range names {
		if n == "-h" || n == "--help" {
			panic(fmt.Sprintf("cli: option spec %q takes the help option", spec))
		}
	}
	return names, metas
}

// Func declares an option whose values go to set, once per occurrence
// (so it can accumulate them); it takes as many values as spec names
// after its spellings ("--weight DEV W" takes two), or none for a switch,
// which set receives as "true" or the text after = (--force=false).
func (c *Command) Func(spec, help string, set func(vals []string) error) *Option {
	names, metas := parseSpec(spec)
	for _, n := range names {
		for _, o := range c.opts {
			if o.has(n) {
				panic(fmt.Sprintf("cli: %s declared twice on %q", n, c.Name))
			}
		}
	}
	o := &Option{names: names, metas: metas, help: help, set: set}
	c.opts = append(c.opts, o)
	return o
}

// one declares a single-valued option, or a switch when spec names no
// value; the usage shows the default def when it is not empty.
func (c *Command) one(spec, help, def string, set func(string) error) *Option {
	o := c.Func(spec, help, func(v []string) error { return set(v[0]) })
	if len(o.metas) > 1 {
		panic(fmt.Sprintf("cli: option spec %q: one value expected", spec))
	}
	o.def = def
	return o
}

// String declares an option setting *p; the last one given wins.
func (c *Command) String(p *string, spec, help string) *Option {
	return c.one(spec, help, *p, func(v string) error { *p = v; return nil })
}

// Strings declares an option appending each value it is given to *p.
func (c *Command) Strings(p *[]string, spec, help string) *Option {
	return c.one(spec, help, "", func(v string) error { *p = append(*p, v); return nil })
}

// Choice declares an option setting *p to one of choices.
func (c *Command) Choice(p *string, spec string, choices []string, help string) *Option {
	return c.one(spec, help, *p, func(v string) error {
		if !slices.Contains(choices, v) {
			return fmt.Errorf("want %s", orList(choices))
		}
		*p = v
		return nil
	})
}

// Bool declares a switch setting *p: --opt sets it, --opt=false clears it.
func (c *Command) Bool(p *bool, spec, help string) *Option {
	def := ""
	if *p {
		def = "true"
	}
	o := c.one(spec, help, def, func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		*p = b
		return nil
	})
	if !o.IsSwitch() {
		panic(fmt.Sprintf("cli: switch spec %q names a value", spec))
	}
	return o
}

// Int declares an option setting *p to an integer.
func (c *Command) Int(p *int, spec, help string) *Option {
	return c.one(spec, help, nonZero(*p), func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("want an integer")
		}
		*p = n
		return nil
	})
}

// Int64 declares an option setting *p to an integer.
func (c *Command) Int64(p *int64, spec, help string) *Option {
	return c.one(spec, help, nonZero(*p), func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer")
		}
		*p = n
		return nil
	})
}

// Uint64 declares an option setting *p to a natural number.
func (c *Command) Uint64(p *uint64, spec, help string) *Option {
	return c.one(spec, help, nonZero(*p), func(v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("want a natural number")
		}
		*p = n
		return nil
	})
}

// Float64 declares an option setting *p to a number.
func (c *Command) Float64(p *float64, spec, help string) *Option {
	return c.one(spec, help, nonZero(*p), func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("want a number")
		}
		*p = f
		return nil
	})
}

// Duration declares an option setting *p from Go's duration syntax (10m,
// 1h30m, 500ms).
func (c *Command) Duration(p *time.Duration, spec, help string) *Option {
	def := ""
	if *p != 0 {
		def = p.String()
	}
	return c.one(spec, help, def, func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("want a duration such as 90s or 10m")
		}
		*p = d
		return nil
	})
}

func nonZero[T comparable](v T) string {
	var zero T
	if v == zero {
		return ""
	}
	return fmt.Sprint(v)
}

// orList writes "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
