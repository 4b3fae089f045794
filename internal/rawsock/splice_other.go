//go:build !linux

package rawsock

import (
	"errors"
	"syscall"
)

// Splicer would hand memory to a socket by reference; only Linux has
// vmsplice and splice.
type Splicer struct{}

// NewSplicer fails: everything is copied here.
func NewSplicer() (*Splicer, error) {
	return nil, errors.New("rawsock: no splice on this system")
}

// Close does nothing.
func (s *Splicer) Close() error { return nil }

func (s *Splicer) buffered() int { return 0 }

// Splice fails.
func (w *Writer) Splice(s *Splicer, p []byte) error { return syscall.ENOSYS }
