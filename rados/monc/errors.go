package monc

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// ErrClosed is returned by calls on a Client after Close, and by calls
// that were waiting when it was closed.
var ErrClosed = errors.New("monc: client closed")

// CommandError is a monitor command's failure: the monitor's negative
// return code, as a positive errno, and its status string. errors.Is
// matches it against the syscall.Errno of the same number.
type CommandError struct {
	Prefix string        // the command's "prefix", when it had one
	Errno  syscall.Errno // e.g. syscall.ENOENT
	Status string        // the monitor's explanation (what `ceph` prints on stderr)
}

func (e *CommandError) Error() string {
	what := "mon command"
	if e.Prefix != "" {
		what = fmt.Sprintf("mon command %q", e.Prefix)
	}
	if e.Status == "" {
		return fmt.Sprintf("monc: %s failed: %v (errno %d)", what, e.Errno, int(e.Errno))
	}
	return fmt.Sprintf("monc: %s failed: %s: %v (errno %d)", what, e.Status, e.Errno, int(e.Errno))
}

// Is reports whether target is the syscall.Errno of this failure.
func (e *CommandError) Is(target error) bool {
	t, ok := target.(syscall.Errno)
	return ok && t == e.Errno
}

// Attempt is one failed connection to a monitor while hunting.
type Attempt struct {
	Addr string
	Err  error
}

// HuntError reports that no monitor session could be established: every
// address tried, with why it failed (the last failure per address; an
// attempt the deadline cut short does not replace an earlier failure).
// errors.Is and errors.As see through to the individual failures, so an
// auth.ErrAuthFailed or a context deadline among them can be detected.
type HuntError struct {
	Attempts []Attempt
	// Reason says why hunting stopped: the caller's deadline, or a
	// failure that retrying would not cure.
	Reason error
}

func (e *HuntError) Error() string {
	var b strings.Builder
	b.WriteString("monc: no monitor session")
	switch {
	case e.Reason == nil:
	case e.final():
		b.WriteString(" (a final failure: not retried)")
	default:
		fmt.Fprintf(&b, " (%v)", e.Reason)
	}
	addrs := make([]string, len(e.Attempts))
	for i, a := range e.Attempts {
		addrs[i] = a.Addr
	}
	fmt.Fprintf(&b, "; tried %s", strings.Join(addrs, ", "))
	for _, a := range e.Attempts {
		fmt.Fprintf(&b, "; %s: %v", a.Addr, a.Err)
	}
	return b.String()
}

// final reports whether the hunt stopped on one of its failures rather
// than on a deadline.
func (e *HuntError) final() bool {
	for _, a := range e.Attempts {
		if a.Err == e.Reason {
			return true
		}
	}
	return false
}

// Unwrap returns the reason and the individual failures.
func (e *HuntError) Unwrap() []error {
	out := make([]error, 0, len(e.Attempts)+1)
	if e.Reason != nil && !e.final() {
		out = append(out, e.Reason)
	}
	for _, a := range e.Attempts {
		out = append(out, a.Err)
	}
	return out
}
