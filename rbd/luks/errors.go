package luks

import "errors"

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
)
