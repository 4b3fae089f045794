package msgr

import (
	"encoding/binary"
	"fmt"
	"io"
)

// probeLen is how much of a large segment is read before the whole
// segment is allocated, so a peer that announces a huge frame and sends
// little makes us allocate little.
const probeLen = 64 << 10

// frameReader decodes frames from a byte stream in crc mode (rx nil) or
// secure mode. It is used by one goroutine at a time.
type frameReader struct {
	rx    *gcmState
	lim   limits
	pre   [preambleSecureLen]byte
	probe []byte
}

func newFrameReader(lim limits) *frameReader { return &frameReader{lim: lim} }

// readSized reads exactly n bytes into fresh memory; beyond probeLen the
// allocation follows the data actually received.
func (fr *frameReader) readSized(r io.Reader, n uint64) ([]byte, error) {
	if n <= probeLen {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	if fr.probe == nil {
		fr.probe = make([]byte, probeLen)
	}
	if _, err := io.ReadFull(r, fr.probe); err != nil {
		return nil, err
	}
	b := make([]byte, n)
	copy(b, fr.probe)
	if _, err := io.ReadFull(r, b[probeLen:]); err != nil {
		return nil, err
	}
	return b, nil
}

// read decodes one frame.
func (fr *frameReader) read(r io.Reader) (frame, error) {
	if fr.rx != nil {
		return fr.readSecure(r)
	}
	return fr.readPlain(r)
}

func (fr *frameReader) readPlain(r io.Reader) (frame, error) {
	var f frame
	if _, err := io.ReadFull(r, fr.pre[:preambleLen]); err != nil {
		return f, err
	}
	var pr preamble
	if err := pr.decode(fr.pre[:preambleLen], fr.lim); err != nil {
		return f, err
	}
	f.tag = pr.tag
	n := pr.lens[0]
	ctrl, err := fr.readSized(r, uint64(n)+crcLen)
	if err != nil {
		return f, err
	}
	if got, want := binary.LittleEndian.Uint32(ctrl[n:]), crc32c(^uint32(0), ctrl[:n]); got != want {
		return f, fmt.Errorf("%w: bad control segment crc %#x, computed %#x (tag %d)", ErrProtocol, got, want, pr.tag)
	}
	f.segs[0] = ctrl[:n:n]
	if !pr.hasTail() {
		return f, nil
	}
	tail := uint64(pr.lens[1]) + uint64(pr.lens[2]) + uint64(pr.lens[3])
	buf, err := fr.readSized(r, tail+epiloguePlainLen)
	if err != nil {
		return f, err
	}
	off := uint64(0)
	for i := 1; i < maxSegments; i++ {
		l := uint64(pr.lens[i])
		if i < pr.nseg {
			f.segs[i] = buf[off : off+l : off+l]
		}
		off += l
	}
	ep := buf[tail:]
	if ep[0]&lateStatusMask != lateStatusComplete {
		return f, fmt.Errorf("%w: frame aborted by the sender (late status %#x)", ErrProtocol, ep[0])
	}
	for i := 1; i < maxSegments; i++ {
		want := uint32(0)
		if i < pr.nseg {
			want = crc32c(^uint32(0), f.segs[i])
		}
		if got := binary.LittleEndian.Uint32(ep[1+4*(i-1):]); got != want {
			return f, fmt.Errorf("%w: bad crc of segment %d: %#x, computed %#x", ErrProtocol, i, got, want)
		}
	}
	return f, nil
}

func (fr *frameReader) readSecure(r io.Reader) (frame, error) {
	var f frame
	if _, err := io.ReadFull(r, fr.pre[:]); err != nil {
		return f, err
	}
	head, err := fr.rx.open(fr.pre[:])
	if err != nil {
		return f, err
	}
	var pr preamble
	if err := pr.decode(head[:preambleLen], fr.lim); err != nil {
		return f, err
	}
	f.tag = pr.tag
	n := pr.lens[0]
	if n <= inlineLen {
		f.segs[0] = make([]byte, n)
		copy(f.segs[0], head[preambleLen:])
	} else {
		// The remainder is read (and its size proven) before the whole
		// control segment is allocated.
		rem := n - inlineLen
		buf, err := fr.readSized(r, uint64(padded(rem))+gcmTagLen)
		if err != nil {
			return f, err
		}
		pt, err := fr.rx.open(buf)
		if err != nil {
			return f, err
		}
		ctrl := make([]byte, n)
		copy(ctrl, head[preambleLen:preambleLen+inlineLen])
		copy(ctrl[inlineLen:], pt[:rem])
		f.segs[0] = ctrl
	}
	if !pr.hasTail() {
		return f, nil
	}
	var tail uint64
	for i := 1; i < maxSegments; i++ {
		tail += uint64(padded(pr.lens[i]))
	}
	buf, err := fr.readSized(r, tail+epilogueSecureLen)
	if err != nil {
		return f, err
	}
	pt, err := fr.rx.open(buf)
	if err != nil {
		return f, err
	}
	off := uint64(0)
	for i := 1; i < maxSegments; i++ {
		l := uint64(pr.lens[i])
		if i < pr.nseg {
			f.segs[i] = pt[off : off+l : off+l]
		}
		off += uint64(padded(pr.lens[i]))
	}
	if late := pt[tail]; late&lateStatusMask != lateStatusComplete {
		return f, fmt.Errorf("%w: frame aborted by the sender (late status %#x)", ErrProtocol, late)
	}
	return f, nil
}
