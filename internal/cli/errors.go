package cli

import (
	"errors"
	"fmt"
	"io"
)

// ErrorKind says what is wrong with a command line.
type ErrorKind int

const (
	// UnknownCommand: a word names no command of the group.
	UnknownCommand ErrorKind = iota + 1
	// MissingCommand: a group was given without one of its commands.
	MissingCommand
	// UnknownOption: no command on the path declares the option.
	UnknownOption
	// MissingValue: an option's value is missing.
	MissingValue
	// BadValue: an option's value is malformed.
	BadValue
	// MissingArgument: a positional argument, or a required option, is
	// missing.
	MissingArgument
	// BadArgument: a positional argument is malformed.
	BadArgument
	// ExtraArgument: more positional arguments than the command takes.
	ExtraArgument
)

// UsageError is a mistake in a command line.
type UsageError struct {
	Kind ErrorKind
	Msg  string
	// Command is the command the mistake is in (set by Execute for an
	// error a verb returns).
	Command *Command

	path string
}

func (e *UsageError) Error() string { return e.Msg }

// Status is the exit status for e: its command's UsageStatus.
func (e *UsageError) Status() int { return e.Command.usageStatus(e.Kind) }

// Usagef returns a UsageError of the kind, for a verb that finds a
// mistake in its arguments itself.
func Usagef(kind ErrorKind, format string, args ...any) *UsageError {
	return &UsageError{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// ExitStatus is an error a verb returns after reporting the failure
// itself (as `ceph` does): it only sets the exit status.
type ExitStatus int

func (e ExitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// CommandError is an error a verb returned, with the command's name.
type CommandError struct {
	Path string // "purerbd rbd create"
	Err  error
}

func (e *CommandError) Error() string { return e.Err.Error() }
func (e *CommandError) Unwrap() error { return e.Err }

// Report prints err as a command-line tool does, on stderr, and returns
// the exit status: 0 for nil; an ExitStatus as it is (the verb reported
// it); a UsageError's message with where to find the usage, and its
// command's status; any other error after the command's name, and 1.
func Report(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var st ExitStatus
	if errors.As(err, &st) {
		return int(st)
	}
	var ue *UsageError
	if errors.As(err, &ue) && ue.Command != nil {
		fmt.Fprintf(stderr, "%s: %s\n", ue.path, ue.Msg)
		if ue.Kind == MissingCommand || ue.Kind == UnknownCommand {
			writeCommands(stderr, ue.Command)
		}
		fmt.Fprintf(stderr, "'%s --help' shows the usage\n", ue.path)
		return ue.Status()
	}
	var ce *CommandError
	if errors.As(err, &ce) {
		fmt.Fprintf(stderr, "%s: %v\n", ce.Path, ce.Err)
		return 1
	}
	fmt.Fprintln(stderr, err)
	return 1
}
