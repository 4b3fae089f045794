// Package cli parses command lines with the option syntax of Ceph's
// tools and runs a tree of commands.
//
// A command is a group (it has subcommands: `purerbd rbd snap`) or a verb
// (it has Run: `purerbd rbd snap ls`). Each declares its own options; an
// option declared on a command applies to every command below it, so the
// options of the root are global. The syntax is the one `rbd` and
// `rados` accept:
//
//   - long options as --opt value or --opt=value, with _ and - the same
//     in their names (--mon_host is --mon-host);
//   - short options as -o value or -o=value;
//   - options anywhere among the positional arguments, before or after
//     the words that select the command; -- ends them, - alone is an
//     argument (standard input or output);
//   - an option given twice keeps its last value, unless it accumulates
//     (Strings, Func);
//   - -h, --help or the word help prints the usage of the command reached
//     to standard output, and nothing runs.
//
// Errors in the command line are UsageErrors; Report prints them and maps
// them to an exit status through the UsageStatus of the command they
// belong to, so a subtree can exit as the Ceph tool it mirrors does.
package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Unlimited as MaxArgs lets a command take any number of positional
// arguments.
const Unlimited = -1

// Command is one node of a command tree.
type Command struct {
	// Name is the word that selects the command; Aliases are others
	// ("list" for "ls").
	Name    string
	Aliases []string
	// Summary is one line for the list of commands in the parent's usage.
	Summary string
	// Args is the synopsis of the positional arguments ("IMAGE[@SNAP]");
	// its words not in brackets name the required ones in messages.
	Args string
	// MinArgs and MaxArgs bound the number of positional arguments
	// (MaxArgs Unlimited: no bound). Both zero: the command takes none.
	MinArgs, MaxArgs int
	// Help is printed in the command's usage after the synopsis.
	Help string
	// Run runs a verb. A command with subcommands has none.
	Run func(ctx context.Context, inv *Invocation) error
	// Before, when set, runs before the verb for every command on the
	// path from the root to it, the root's first; after (if not nil)
	// runs once the verb returned, in the reverse order.
	Before func(ctx context.Context, inv *Invocation) (after func(), err error)
	// UsageStatus gives the exit status of a usage error of this
	// command or of one below it that has none of its own (nil all the
	// way up: 2).
	UsageStatus func(ErrorKind) int
	// Value, when set, is what the command's options are bound to, for a
	// caller that parses a command line without running it (Parse) and
	// reads what it said: a tool reading another process's command line
	// from /proc.
	Value any

	parent *Command
	subs   []*Command
	opts   []*Option
}

// Add makes subs subcommands of c and returns c.
func (c *Command) Add(subs ...*Command) *Command {
	for _, s := range subs {
		if s.parent != nil {
			panic(fmt.Sprintf("cli: command %q added twice", s.Name))
		}
		if c.find(s.Name) != nil {
			panic(fmt.Sprintf("cli: two commands %q under %q", s.Name, c.Name))
		}
		s.parent = c
		c.subs = append(c.subs, s)
	}
	return c
}

// Subcommands returns c's subcommands in the order they were added.
func (c *Command) Subcommands() []*Command { return c.subs }

// Options returns the options c declares (not those of its parents).
func (c *Command) Options() []*Option { return c.opts }

// Parent returns the command c is a subcommand of, or nil.
func (c *Command) Parent() *Command { return c.parent }

// Find returns the command the words select below c (by name or alias),
// or nil.
func (c *Command) Find(words ...string) *Command {
	for _, w := range words {
		if c = c.find(w); c == nil {
			return nil
		}
	}
	return c
}

func (c *Command) find(word string) *Command {
	for _, s := range c.subs {
		if s.Name == word {
			return s
		}
		for _, a := range s.Aliases {
			if a == word {
				return s
			}
		}
	}
	return nil
}

// usageStatus is the exit status of a usage error of kind k in c.
func (c *Command) usageStatus(k ErrorKind) int {
	for ; c != nil; c = c.parent {
		if c.UsageStatus != nil {
			return c.UsageStatus(k)
		}
	}
	return 2
}

// chain lists the commands from the root down to c.
func (c *Command) chain() []*Command {
	var out []*Command
	for ; c != nil; c = c.parent {
		out = append([]*Command{c}, out...)
	}
	return out
}

// path is how c is named on a command line that starts at start: start's
// name and the words below it ("purerbd rbd snap ls"; "rbd snap ls" for
// a tree entered at its rbd command).
func path(start, c *Command) string {
	var words []string
	for ; c != nil && c != start; c = c.parent {
		words = append([]string{c.Name}, words...)
	}
	return strings.Join(append([]string{start.Name}, words...), " ")
}

// Streams are a command's standard input and outputs.
type Streams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Invocation is a parsed command line: the command it selects and its
// positional arguments (the options went to the variables bound to
// them).
type Invocation struct {
	Streams
	Command *Command
	Args    []string
	// Help is set when the command line asked for the usage.
	Help bool

	start *Command
}

// Path names the command as the command line did ("purerbd rbd create").
func (inv *Invocation) Path() string { return path(inv.start, inv.Command) }

// Execute parses args below start, then prints the usage if they asked
// for it, or runs the command they select. A command line starting at a
// command other than the root still takes its parents' options. The
// errors of the command line are *UsageError; an error of Run comes back
// as a *CommandError naming the command, unless it is a *UsageError or an
// ExitStatus itself.
func Execute(ctx context.Context, start *Command, args []string, s Streams) error {
	inv, err := Parse(start, args)
	if err != nil {
		return err
	}
	inv.Streams = s
	if inv.Help {
		return WriteUsage(s.Stdout, start, inv.Command)
	}
	return inv.run(ctx)
}

func (inv *Invocation) run(ctx context.Context) (err error) {
	for _, c := range inv.Command.chain() {
		if c.Before == nil {
			continue
		}
		after, err := c.Before(ctx, inv)
		if err != nil {
			return inv.wrap(err)
		}
		if after != nil {
			defer after()
		}
	}
	return inv.wrap(inv.Command.Run(ctx, inv))
}

// wrap names the command in an error of its run.
func (inv *Invocation) wrap(err error) error {
	if err == nil {
		return nil
	}
	switch e := err.(type) {
	case ExitStatus:
		return e
	case *UsageError:
		if e.Command == nil {
			e.Command, e.path = inv.Command, inv.Path()
		}
		return e
	}
	return &CommandError{Path: inv.Path(), Err: err}
}

// Run is what a main function does: Execute, then Report. It returns the
// exit status.
func Run(ctx context.Context, start *Command, args []string, s Streams) int {
	return Report(Execute(ctx, start, args, s), s.Stderr)
}
