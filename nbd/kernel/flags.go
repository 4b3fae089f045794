package kernel

import "github.com/purerbd/purerbd/nbd"

// kernelFlags are the transmission flags the kernel client reads.
const kernelFlags = FlagHasFlags | FlagReadOnly | FlagSendFlush | FlagSendFUA | FlagRotational |
	FlagSendTrim | FlagSendWriteZeroes | FlagCanMultiConn

// serverFlags are the transmission flags the package nbd server announces
// for the export of b (nbd.Export.TransmissionFlags, one rule for both
// paths), restricted to those the kernel client reads. b must not be nil
// (AttachConfig.check).
func serverFlags(b nbd.Backend, readOnly, rotational bool) ServerFlags {
	e := nbd.Export{Backend: b, ReadOnly: readOnly, Rotational: rotational}
	f, err := e.TransmissionFlags()
	if err != nil {
		// Only a nil backend fails an export without name, description
		// or block sizes; announce nothing it could be asked to do.
		return FlagHasFlags | FlagReadOnly
	}
	return ServerFlags(f) & kernelFlags
}
