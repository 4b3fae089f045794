package luks

import (
	"errors"
	"fmt"
	"strconv"
)

var (
	// ErrNotLUKS is returned when the bytes at the start of an image are
	// not a LUKS header (no LUKS magic, or a version other than 1 or 2).
	ErrNotLUKS = errors.New("luks: not a LUKS header")
	// ErrWrongPassphrase is returned when no keyslot opens with the given
	// passphrase.
	ErrWrongPassphrase = errors.New("luks: no keyslot opens with this passphrase")
	// ErrUnsupported is returned for a valid header that uses something
	// this package does not implement (a cipher other than AES-XTS, a KDF
	// or hash it lacks, an integrity segment, a reencryption in progress).
	ErrUnsupported = errors.New("luks: unsupported")
	// ErrCorrupt is returned for a header whose fields contradict each
	// other or the LUKS format (bad checksum, offsets out of range).
	ErrCorrupt = errors.New("luks: corrupt header")
	// ErrSpecCount is returned when more encryption specs are given than
	// the image has layers (itself and its ancestors), as librbd refuses
	// them.
	ErrSpecCount = errors.New("luks: more encryption specs than the image and its ancestors")
)

// errNoMagic is ErrNotLUKS for bytes with no LUKS magic at all: what
// librbd takes for a plaintext ancestor when it tries the last spec on
// an ancestor that has no spec of its own.
var errNoMagic = fmt.Errorf("%w: no LUKS magic", ErrNotLUKS)

// LayerError is the failure to open one layer of an image's encryption:
// the image itself (Layer 0), its parent (1), and so on up its clone
// chain.
type LayerError struct {
	Layer int
	// Image names the layer's image (its name, or its id when the name
	// is unknown).
	Image string
	// Assumed is set when no spec was given for the layer and the last
	// one was tried, as librbd tries it.
	Assumed bool
	Err     error
}

func (e *LayerError) Error() string {
	var which string
	switch e.Layer {
	case 0:
		which = "the image"
	case 1:
		which = "its parent"
	default:
		which = fmt.Sprintf("ancestor %d", e.Layer)
	}
	if e.Image != "" {
		which += " " + strconv.Quote(e.Image)
	}
	if e.Assumed {
		which += ", given no spec of its own, with the last spec"
	}
	return fmt.Sprintf("luks: encryption of %s: %v", which, e.Err)
}

func (e *LayerError) Unwrap() error { return e.Err }
