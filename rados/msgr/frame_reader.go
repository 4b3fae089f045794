package msgr

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/purerbd/purerbd/rados/crc32c"
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
	epi   [epiloguePlainLen]byte
	probe []byte

	// dataBuf, when set, may supply the memory for the data segment of
	// a MESSAGE frame in crc mode, given its control segment and the
	// segment's length (nil: allocate as usual). While filling it the
	// reader asks dataKeep, before each chunk, whether the owner still
	// wants it; dataDone is called once the reader no longer writes into
	// it, and says whether the owner still wanted it then.
	dataBuf  func(control []byte, n uint32) []byte
	dataKeep func() bool
	dataDone func() bool
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
	probe := fr.scratch()
	if _, err := io.ReadFull(r, probe); err != nil {
		return nil, err
	}
	b := make([]byte, n)
	copy(b, probe)
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
	n := uint64(pr.lens[0])
	// The control segment goes to scratch memory first (it decides where
	// the data segment goes); a huge one is read as it comes.
	var ctrl []byte
	var err error
	if n+crcLen <= probeLen {
		ctrl = fr.scratch()[:n+crcLen]
		_, err = io.ReadFull(r, ctrl)
	} else {
		ctrl, err = fr.readSized(r, n+crcLen)
	}
	if err != nil {
		return f, err
	}
	if got, want := binary.LittleEndian.Uint32(ctrl[n:]), crc32c.Checksum(ctrl[:n]); got != want {
		return f, fmt.Errorf("%w: bad control segment crc %#x, computed %#x (tag %d)", ErrProtocol, got, want, pr.tag)
	}
	ctrl = ctrl[:n]
	var dst []byte
	if pr.tag == tagMessage && pr.lens[3] > 0 && fr.dataBuf != nil {
		dst = fr.dataBuf(ctrl, pr.lens[3])
	}
	// The rest of the frame read into memory of its own; a small frame
	// takes one allocation for all its segments.
	l1, l2, l3 := uint64(pr.lens[1]), uint64(pr.lens[2]), uint64(pr.lens[3])
	rest := l1 + l2
	if dst == nil && pr.hasTail() {
		rest += l3 + epiloguePlainLen
	}
	var buf []byte
	if n+rest <= probeLen {
		buf = make([]byte, n+rest)
		copy(buf, ctrl)
		f.segs[0] = buf[:n:n]
		buf = buf[n:]
	} else {
		f.segs[0] = make([]byte, n)
		copy(f.segs[0], ctrl)
	}
	if !pr.hasTail() {
		return f, nil
	}
	var crcs [maxSegments]uint32
	var ep []byte
	if dst != nil {
		if ep, err = fr.readInto(r, &f, &pr, buf, dst, &crcs); err != nil {
			return f, err
		}
	} else {
		if buf == nil {
			if buf, err = fr.readSized(r, rest); err != nil {
				return f, err
			}
		} else if _, err := io.ReadFull(r, buf); err != nil {
			return f, err
		}
		off := uint64(0)
		for i := 1; i < maxSegments; i++ {
			l := uint64(pr.lens[i])
			if i < pr.nseg {
				f.segs[i] = buf[off : off+l : off+l]
				crcs[i] = crc32c.Checksum(f.segs[i])
			}
			off += l
		}
		ep = buf[off:]
	}
	if ep[0]&lateStatusMask != lateStatusComplete {
		return f, fmt.Errorf("%w: frame aborted by the sender (late status %#x)", ErrProtocol, ep[0])
	}
	for i := 1; i < maxSegments; i++ {
		if got := binary.LittleEndian.Uint32(ep[1+4*(i-1):]); got != crcs[i] {
			return f, fmt.Errorf("%w: bad crc of segment %d: %#x, computed %#x", ErrProtocol, i, got, crcs[i])
		}
	}
	return f, nil
}

// scratch returns the reader's probeLen bytes of scratch memory.
func (fr *frameReader) scratch() []byte {
	if fr.probe == nil {
		fr.probe = make([]byte, probeLen)
	}
	return fr.probe
}

// dataChunk is the most of a data segment read into an owner's buffer
// between two checks that the owner still wants it (each read returns
// with what has arrived, so usually less), and the most checksummed at a
// time. A read blocks no longer for being larger, and when the reader is
// behind, a larger chunk takes what the socket holds in fewer system
// calls. But the crc32c of a chunk reads what the kernel has just
// copied, and a chunk of 256 KiB is still in a core's L2 cache when it
// does, where 1 MiB may not be.
const dataChunk = 256 << 10

// readInto reads the front and middle segments of a crc-mode frame into
// fm (their length exactly; nil to allocate), the data segment into dst
// (its exact length) in chunks, and the epilogue, which it returns. The
// segments' crcs are computed as they arrive. When the owner withdraws
// dst, the rest of the segment is read into scratch memory and the
// frame is marked dropped; so is a frame whose buffer was withdrawn by
// the time it was complete.
func (fr *frameReader) readInto(r io.Reader, f *frame, pr *preamble, fm, dst []byte, crcs *[maxSegments]uint32) ([]byte, error) {
	filling := true // dst is ours to write into
	defer func() {
		if filling {
			fr.dataDone()
		}
	}()
	l1, l2 := uint64(pr.lens[1]), uint64(pr.lens[2])
	var err error
	if fm == nil {
		fm, err = fr.readSized(r, l1+l2)
	} else {
		_, err = io.ReadFull(r, fm)
	}
	if err != nil {
		return nil, err
	}
	f.segs[1], f.segs[2] = fm[:l1:l1], fm[l1:l1+l2:l1+l2]
	crcs[1], crcs[2] = crc32c.Checksum(f.segs[1]), crc32c.Checksum(f.segs[2])
	crc := ^uint32(0)
	for off := 0; off < len(dst); {
		p := dst[off:min(off+dataChunk, len(dst))]
		if filling && !fr.dataKeep() {
			fr.dataDone()
			filling, f.dropped = false, true
		}
		if !filling {
			p = fr.scratch()[:min(len(p), probeLen)]
		}
		// one read, not a whole chunk: a slow peer's bytes trickling in
		// must not keep a Withdraw waiting past its grace (a loaded
		// machine's OSD took more than 200 ms for 128 KiB, and the
		// session was reset for it); a read returns with the first bytes
		n, err := r.Read(p)
		crc = crc32c.Update(crc, p[:n])
		off += n
		if err != nil {
			if err == io.EOF && off < len(dst) {
				err = io.ErrUnexpectedEOF
			}
			if err != io.EOF {
				return nil, err
			}
		}
	}
	crcs[3] = crc
	if filling {
		filling = false
		if !fr.dataDone() {
			f.dropped = true
		}
	}
	if !f.dropped {
		f.segs[3] = dst
	}
	if _, err := io.ReadFull(r, fr.epi[:]); err != nil {
		return nil, err
	}
	return fr.epi[:], nil
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
