package msgr

import (
	"encoding/binary"
	"fmt"

	"github.com/purerbd/purerbd/rados/crc32c"
)

// Frame tags.
const (
	tagHello               = 1
	tagAuthRequest         = 2
	tagAuthBadMethod       = 3
	tagAuthReplyMore       = 4
	tagAuthRequestMore     = 5
	tagAuthDone            = 6
	tagAuthSignature       = 7
	tagClientIdent         = 8
	tagServerIdent         = 9
	tagIdentMissingFeature = 10
	tagSessionReconnect    = 11
	tagSessionReset        = 12
	tagSessionRetry        = 13
	tagSessionRetryGlobal  = 14
	tagSessionReconnectOK  = 15
	tagWait                = 16
	tagMessage             = 17
	tagKeepalive2          = 18
	tagKeepalive2Ack       = 19
	tagAck                 = 20
)

// Frame layout constants.
const (
	preambleLen       = 32 // tag, count, 4 x (len, align), flags, reserved, crc
	crcLen            = 4
	epiloguePlainLen  = 13 // late status + 3 crc32c
	gcmTagLen         = 16
	gcmBlockLen       = 16
	inlineLen         = 48 // control bytes sealed together with the preamble
	preambleSecureLen = preambleLen + inlineLen + gcmTagLen
	epilogueSecureLen = gcmBlockLen + gcmTagLen // late status padded to a block, tag
	maxSegments       = 4

	lateStatusAborted  = 0x1
	lateStatusComplete = 0xe
	lateStatusMask     = 0xf
)

// segmentAligns are the allocation hints sent for each segment (Ceph
// ignores them on receive beyond allocation).
var segmentAligns = [maxSegments]uint16{8, 8, 8, 4096}

// limits bounds what a peer may make us allocate for one frame.
type limits struct {
	control, front, middle, data uint32
}

// defaultLimits mirror the Linux client's CEPH_MSG_MAX_*_LEN, with room
// for larger data segments.
var defaultLimits = limits{control: 16 << 20, front: 16 << 20, middle: 16 << 20, data: 128 << 20}

// preamble describes a frame.
type preamble struct {
	tag  uint8
	nseg int
	lens [maxSegments]uint32
}

// segmentCount returns the segment count for lens: trailing empty
// segments are dropped, but a frame has at least one.
func segmentCount(lens [maxSegments]uint32) int {
	for i := maxSegments - 1; i > 0; i-- {
		if lens[i] != 0 {
			return i + 1
		}
	}
	return 1
}

// encode writes the preamble with its crc into p[:preambleLen].
func (pr *preamble) encode(p []byte) {
	clear(p[:preambleLen])
	p[0] = pr.tag
	p[1] = uint8(pr.nseg)
	for i := 0; i < pr.nseg; i++ {
		binary.LittleEndian.PutUint32(p[2+6*i:], pr.lens[i])
		binary.LittleEndian.PutUint16(p[6+6*i:], segmentAligns[i])
	}
	binary.LittleEndian.PutUint32(p[preambleLen-crcLen:], crc32c.Update(0, p[:preambleLen-crcLen]))
}

// decode parses and checks a preamble.
func (pr *preamble) decode(p []byte, lim limits) error {
	if got, want := binary.LittleEndian.Uint32(p[preambleLen-crcLen:]), crc32c.Update(0, p[:preambleLen-crcLen]); got != want {
		return fmt.Errorf("%w: bad preamble crc %#x, computed %#x", ErrProtocol, got, want)
	}
	*pr = preamble{tag: p[0], nseg: int(p[1])}
	if pr.nseg < 1 || pr.nseg > maxSegments {
		return fmt.Errorf("%w: frame with %d segments", ErrProtocol, pr.nseg)
	}
	for i := 0; i < pr.nseg; i++ {
		pr.lens[i] = binary.LittleEndian.Uint32(p[2+6*i:])
	}
	max := [maxSegments]uint32{lim.control, lim.front, lim.middle, lim.data}
	for i, l := range pr.lens {
		if l > max[i] {
			return fmt.Errorf("%w: segment %d of %d bytes exceeds the limit of %d", ErrProtocol, i, l, max[i])
		}
	}
	// Only WAIT has an empty control segment; any other empty last
	// segment means a malformed count.
	if pr.nseg > 1 && pr.lens[pr.nseg-1] == 0 {
		return fmt.Errorf("%w: last of %d segments is empty", ErrProtocol, pr.nseg)
	}
	return nil
}

// hasTail reports whether the frame has segments beyond the control one
// (and so an epilogue).
func (pr *preamble) hasTail() bool { return pr.nseg > 1 }

// padded rounds n up to the GCM block size.
func padded(n uint32) uint32 { return (n + gcmBlockLen - 1) &^ (gcmBlockLen - 1) }

// frame is a decoded frame: its tag and segments (control, front,
// middle, data). Segments beyond the count are nil. A dropped frame was
// read and checked, but its data segment went nowhere (its owner
// withdrew the buffer it was arriving into): it is not delivered.
type frame struct {
	tag     uint8
	segs    [maxSegments][]byte
	dropped bool
}
