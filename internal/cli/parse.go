package cli

import (
	"fmt"
	"strings"
)

// Parse reads args below start: the words that select a command, the
// options of every command from the root down to it (the nearest
// declaration of a name wins), and the positional arguments. It checks
// the required options and the number of arguments. When args ask for
// help it returns an Invocation with Help set and ignores what else is
// wrong with them. Its errors are *UsageError.
func Parse(start *Command, args []string) (*Invocation, error) {
	p := &parser{cur: start, seen: map[*Option]bool{}}
	var first *UsageError
	fail := func(e *UsageError) {
		if first == nil && e != nil {
			e.Command, e.path = p.cur, path(start, p.cur)
			first = e
		}
	}
	optionsEnd := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case optionsEnd || a == "-" || !strings.HasPrefix(a, "-"):
			fail(p.word(a))
		case a == "--":
			optionsEnd = true
		default:
			n, err := p.option(args[i:])
			i += n
			fail(err)
		}
	}
	inv := &Invocation{Command: p.cur, Args: p.pos, Help: p.help, start: start}
	if p.help {
		return inv, nil
	}
	if first == nil {
		fail(p.check())
	}
	if first != nil {
		return nil, first
	}
	return inv, nil
}

type parser struct {
	cur  *Command
	pos  []string
	seen map[*Option]bool
	help bool
}

// word takes a word that is not an option: the name of a subcommand while
// the command reached has some ("help" asks for the usage of what the
// words after it name), else a positional argument.
func (p *parser) word(w string) *UsageError {
	if len(p.cur.subs) == 0 {
		p.pos = append(p.pos, w)
		return nil
	}
	if sub := p.cur.find(w); sub != nil {
		p.cur = sub
		return nil
	}
	if w == "help" {
		p.help = true
		return nil
	}
	return &UsageError{Kind: UnknownCommand, Msg: fmt.Sprintf("unknown command %q", w)}
}

// option takes the option at args[0] and its values; it returns how many
// of the arguments after it were its values.
func (p *parser) option(args []string) (int, *UsageError) {
	a := args[0]
	name, val, hasVal := a, "", false
	if strings.HasPrefix(a, "--") {
		if eq := strings.IndexByte(a, '='); eq >= 0 {
			name, val, hasVal = a[:eq], a[eq+1:], true
		}
	} else if len(a) > 2 && a[2] == '=' {
		name, val, hasVal = a[:2], a[3:], true
	}
	name = normalize(name)
	if name == "-h" || name == "--help" {
		p.help = true
		return 0, nil
	}
	o := p.lookup(name)
	if o == nil {
		msg := "unknown option " + name
		if !strings.HasPrefix(name, "--") && len(name) > 2 && p.lookup(normalize("-"+name)) != nil {
			msg += fmt.Sprintf(" (long options take two dashes: -%s)", name)
		}
		return 0, &UsageError{Kind: UnknownOption, Msg: msg}
	}
	p.seen[o] = true
	if o.IsSwitch() {
		if !hasVal {
			val = "true"
		}
		if err := o.set([]string{val}); err != nil {
			return 0, &UsageError{Kind: BadValue, Msg: fmt.Sprintf("%s=%s: %v", name, val, err)}
		}
		return 0, nil
	}
	var vals []string
	if hasVal {
		vals = append(vals, val)
	}
	n := 0
	for len(vals) < len(o.metas) {
		if n+1 >= len(args) {
			return n, &UsageError{Kind: MissingValue,
				Msg: fmt.Sprintf("option %s needs a value (%s)", name, strings.Join(o.metas, " "))}
		}
		n++
		vals = append(vals, args[n])
	}
	if err := o.set(vals); err != nil {
		return n, &UsageError{Kind: BadValue, Msg: fmt.Sprintf("%s %s: %v", name, strings.Join(vals, " "), err)}
	}
	return n, nil
}

// lookup finds the option named name on the command reached or the
// nearest of its parents declaring it.
func (p *parser) lookup(name string) *Option {
	for c := p.cur; c != nil; c = c.parent {
		for _, o := range c.opts {
			if o.has(name) {
				return o
			}
		}
	}
	return nil
}

// check finds what the command line lacks: a command of a group, a
// required option, positional arguments (or it has too many).
func (p *parser) check() *UsageError {
	c := p.cur
	if len(c.subs) > 0 || c.Run == nil {
		return &UsageError{Kind: MissingCommand, Msg: "missing command"}
	}
	for _, cc := range c.chain() {
		for _, o := range cc.opts {
			if o.required && !p.seen[o] {
				return &UsageError{Kind: MissingArgument, Msg: fmt.Sprintf("%s is required", o.name())}
			}
		}
	}
	if n := len(p.pos); n < c.MinArgs {
		return &UsageError{Kind: MissingArgument, Msg: "missing " + missingArg(c, n)}
	}
	if c.MaxArgs != Unlimited && len(p.pos) > c.MaxArgs {
		return &UsageError{Kind: ExtraArgument, Msg: fmt.Sprintf("too many arguments: %q", p.pos[c.MaxArgs:])}
	}
	return nil
}

// missingArg names the first required argument after the n given, from
// the synopsis.
func missingArg(c *Command, n int) string {
	var req []string
	for _, w := range strings.Fields(c.Args) {
		if !strings.HasPrefix(w, "[") {
			req = append(req, w)
		}
	}
	if n < len(req) {
		return req[n]
	}
	if c.Args == "" {
		return "arguments"
	}
	return "arguments (" + c.Args + ")"
}
