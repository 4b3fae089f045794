package nbd

import (
	"fmt"
	"math/bits"
)

// Export is one named device a Server offers.
type Export struct {
	// Name is what clients ask for. The empty name is the default export.
	Name string
	// Description is shown by clients that ask (NBD_INFO_DESCRIPTION,
	// NBD_OPT_LIST).
	Description string
	// Backend holds the data.
	Backend Backend
	// ReadOnly serves the export read-only even if the backend can write.
	ReadOnly bool
	// Rotational hints that the medium is a spinning disk.
	Rotational bool

	// MinBlockSize is the alignment every request must honour (a power of
	// two, at most 64 KiB); 0 means 1. PreferredBlockSize (a power of two,
	// at least 512 and MinBlockSize) is the efficient I/O size; 0 means
	// 4096. MaxPayload bounds READ and WRITE lengths; 0 means 32 MiB,
	// which is also the largest accepted.
	MinBlockSize       uint32
	PreferredBlockSize uint32
	MaxPayload         uint32
}

// exportState is an Export checked and prepared for serving.
type exportState struct {
	Export
	caps      capabilities
	minBlock  uint32
	prefBlock uint32
	maxLoad   uint32
	inline    bool // served by the reading goroutine: the backend never blocks
}

func newExportState(e *Export) (*exportState, error) {
	if e == nil || e.Backend == nil {
		return nil, fmt.Errorf("nbd: export has no backend")
	}
	if len(e.Name) > maxStringLen {
		return nil, fmt.Errorf("nbd: export name is %d bytes, over the %d the protocol allows", len(e.Name), maxStringLen)
	}
	if len(e.Description) > maxStringLen {
		return nil, fmt.Errorf("nbd: export %q: description is over %d bytes", e.Name, maxStringLen)
	}
	s := &exportState{Export: *e, caps: discover(e.Backend)}
	s.minBlock, s.prefBlock, s.maxLoad = e.MinBlockSize, e.PreferredBlockSize, e.MaxPayload
	if s.minBlock == 0 {
		s.minBlock = 1
	}
	if s.prefBlock == 0 {
		s.prefBlock = max(DefaultPreferredBlockSize, s.minBlock)
	}
	if s.maxLoad == 0 {
		s.maxLoad = DefaultMaxPayload
	}
	switch {
	case bits.OnesCount32(s.minBlock) != 1 || s.minBlock > 64<<10:
		return nil, fmt.Errorf("nbd: export %q: minimum block size %d is not a power of two up to 64 KiB", e.Name, s.minBlock)
	case bits.OnesCount32(s.prefBlock) != 1 || s.prefBlock < max(512, s.minBlock):
		return nil, fmt.Errorf("nbd: export %q: preferred block size %d is not a power of two of at least 512 and the minimum", e.Name, s.prefBlock)
	case s.maxLoad < s.prefBlock || s.maxLoad > DefaultMaxPayload || s.maxLoad%s.minBlock != 0:
		return nil, fmt.Errorf("nbd: export %q: maximum payload %d must be a multiple of the minimum block size between the preferred block size and %d", e.Name, s.maxLoad, DefaultMaxPayload)
	}
	if s.caps.readOnly {
		s.ReadOnly = true
	}
	// Only the type itself: a type that embeds *Memory may well block.
	_, s.inline = e.Backend.(*Memory)
	return s, nil
}

// transmissionFlags are the flags sent for this export. structured tells
// whether the client negotiated structured replies (NBD_FLAG_SEND_DF
// depends on it).
func (s *exportState) transmissionFlags(structured bool) uint16 {
	f := uint16(flagHasFlags | flagSendCache)
	if s.ReadOnly {
		f |= flagReadOnly
	} else {
		f |= flagSendWriteZeroes | flagSendFastZero
		if s.caps.trim != nil {
			f |= flagSendTrim
		}
		if s.caps.flush != nil {
			f |= flagSendFUA
		}
	}
	if s.caps.flush != nil {
		f |= flagSendFlush
	}
	if s.Rotational {
		f |= flagRotational
	}
	if structured {
		f |= flagSendDF
	}
	if s.caps.multiConn {
		f |= flagCanMultiConn
	}
	return f
}

// TransmissionFlags returns the transmission flags (NBD_FLAG_*) the
// server announces for e to a client without structured replies, such as
// the kernel, whose flags are handed over out of band (netlink
// NBD_ATTR_SERVER_FLAGS). It fails if e is not a valid export.
func (e *Export) TransmissionFlags() (uint16, error) {
	s, err := newExportState(e)
	if err != nil {
		return 0, err
	}
	return s.transmissionFlags(false), nil
}
