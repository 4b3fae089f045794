package kernel

import "github.com/purerbd/purerbd/nbd"

// serverFlags are the transmission flags the package nbd server gives the
// export, restricted to those the kernel client reads. It follows the
// server's rules: flush and FUA with a Flusher, trim with a Trimmer or
// Discarder, write zeroes whenever writable (the server falls back to
// writing zero buffers), multi-connection for coherent backends.
func serverFlags(b nbd.Backend, readOnly, rotational bool) ServerFlags {
	f := FlagHasFlags
	if ro, ok := b.(nbd.ReadOnlyBackend); ok && ro.ReadOnly() {
		readOnly = true
	}
	_, flush := b.(nbd.Flusher)
	if readOnly {
		f |= FlagReadOnly
	} else {
		f |= FlagSendWriteZeroes
		_, trim := b.(nbd.Trimmer)
		_, discard := b.(nbd.Discarder)
		if trim || discard {
			f |= FlagSendTrim
		}
		if flush {
			f |= FlagSendFUA
		}
	}
	if flush {
		f |= FlagSendFlush
	}
	if rotational {
		f |= FlagRotational
	}
	if m, ok := b.(nbd.MultiConnCoherent); ok && m.MultiConnCoherent() {
		f |= FlagCanMultiConn
	}
	return f
}
