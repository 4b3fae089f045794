package msgr

import (
	"encoding/binary"
	"net"

	"github.com/purerbd/purerbd/rados/crc32c"
)

// keepScratch bounds the scratch memory kept between batches of frames.
const keepScratch = 8 << 20

// frameWriter encodes frames in crc mode (tx nil) or secure mode into
// buffers ready for writev. Several frames may be added to one batch
// (add), then written together; the buffers stay valid until reset. Used
// by one goroutine at a time.
type frameWriter struct {
	tx    *gcmState
	arena []byte      // scratch for the batch: heads, epilogues, sealed tails
	used  int         // scratch the batch asked for
	out   net.Buffers // the batch's buffers, in order
	// splice holds the indexes in out, ascending, of the buffers to send
	// by reference (Message.SpliceData); the rest are copied.
	splice []int
}

// alloc returns n bytes of the arena, with room for a GCM tag after
// them (so sealing in place does not reallocate). A full arena is
// replaced, not grown: slices handed out earlier keep the old one.
func (fw *frameWriter) alloc(n int) []byte {
	need := n + gcmTagLen
	fw.used += need
	if cap(fw.arena)-len(fw.arena) < need {
		fw.arena = make([]byte, 0, max(need, 4096))
	}
	off := len(fw.arena)
	fw.arena = fw.arena[:off+need]
	return fw.arena[off : off+n : off+need]
}

// size is the length of the batch's frames.
func (fw *frameWriter) size() int {
	n := 0
	for _, b := range fw.out {
		n += len(b)
	}
	return n
}

// reset starts a new batch; the buffers of the previous one become
// invalid and user data is no longer referenced. The arena is sized for
// the batch just written (up to keepScratch), so batches alike need no
// new one.
func (fw *frameWriter) reset() {
	clear(fw.out)
	fw.out = fw.out[:0]
	fw.splice = fw.splice[:0]
	switch {
	case fw.used > keepScratch:
		fw.arena = nil
	case fw.used > cap(fw.arena):
		fw.arena = make([]byte, 0, fw.used+fw.used/4)
	}
	fw.arena = fw.arena[:0]
	fw.used = 0
}

// build encodes one frame as a batch of its own (reset, then add) and
// returns its buffers, valid until the next call.
func (fw *frameWriter) build(tag uint8, segs *[maxSegments][]byte) net.Buffers {
	fw.reset()
	fw.add(tag, segs)
	return fw.out
}

// add encodes a frame with tag and segments (control, front, middle,
// data) and appends it to the batch. The front, middle and data slices
// are referenced, not copied, in crc mode. Frames of a batch must go
// out in the order they were added (secure mode numbers them).
func (fw *frameWriter) add(tag uint8, segs *[maxSegments][]byte) {
	fw.addSummed(tag, segs, nil, false)
}

// addSummed is add with the crcs of segments 1-3 computed beforehand
// (crc32c.Checksum), or nil to compute them here, and with spliceData
// set to have a data segment sent by reference (its index goes into
// fw.splice). Only crc mode uses either: secure mode seals copies.
func (fw *frameWriter) addSummed(tag uint8, segs *[maxSegments][]byte, crcs *[maxSegments - 1]uint32, spliceData bool) {
	var pr preamble
	pr.tag = tag
	for i := range segs {
		pr.lens[i] = uint32(len(segs[i]))
	}
	pr.nseg = segmentCount(pr.lens)
	if fw.tx != nil {
		fw.addSecure(&pr, segs)
	} else {
		fw.addPlain(&pr, segs, crcs, spliceData)
	}
}

func (fw *frameWriter) addPlain(pr *preamble, segs *[maxSegments][]byte, crcs *[maxSegments - 1]uint32, spliceData bool) {
	n := len(segs[0])
	hlen := preambleLen + n + crcLen
	if !pr.hasTail() {
		h := fw.alloc(hlen)
		fw.head(h, pr, segs[0])
		fw.out = append(fw.out, h)
		return
	}
	h := fw.alloc(hlen + epiloguePlainLen)
	fw.head(h, pr, segs[0])
	fw.out = append(fw.out, h[:hlen])
	ep := h[hlen : hlen+epiloguePlainLen]
	ep[0] = lateStatusComplete
	for i := 1; i < maxSegments; i++ {
		c := uint32(0)
		switch {
		case i >= pr.nseg:
		case crcs != nil:
			c = crcs[i-1]
		default:
			c = crc32c.Checksum(segs[i])
		}
		binary.LittleEndian.PutUint32(ep[1+4*(i-1):], c)
		if len(segs[i]) > 0 {
			if i == maxSegments-1 && spliceData {
				fw.splice = append(fw.splice, len(fw.out))
			}
			fw.out = append(fw.out, segs[i])
		}
	}
	fw.out = append(fw.out, ep)
}

// head writes the preamble, the control segment and its crc into h.
func (fw *frameWriter) head(h []byte, pr *preamble, control []byte) {
	pr.encode(h)
	copy(h[preambleLen:], control)
	binary.LittleEndian.PutUint32(h[preambleLen+len(control):], crc32c.Checksum(control))
}

func (fw *frameWriter) addSecure(pr *preamble, segs *[maxSegments][]byte) {
	n := len(segs[0])
	hlen := preambleSecureLen
	rem := 0
	if n > inlineLen {
		rem = n - inlineLen
		hlen += int(padded(uint32(rem))) + gcmTagLen
	}
	h := fw.alloc(hlen)
	pr.encode(h)
	inl := h[preambleLen : preambleLen+inlineLen]
	clear(inl[copy(inl, segs[0]):])
	fw.tx.seal(h[:preambleLen+inlineLen])
	if rem > 0 {
		r := h[preambleSecureLen : preambleSecureLen+int(padded(uint32(rem)))]
		clear(r[copy(r, segs[0][inlineLen:]):])
		fw.tx.seal(r)
	}
	fw.out = append(fw.out, h)
	if !pr.hasTail() {
		return
	}
	size := epilogueSecureLen - gcmTagLen
	for i := 1; i < maxSegments; i++ {
		size += int(padded(uint32(len(segs[i]))))
	}
	t := fw.alloc(size)
	off := 0
	for i := 1; i < maxSegments; i++ {
		p := int(padded(uint32(len(segs[i]))))
		seg := t[off : off+p]
		clear(seg[copy(seg, segs[i]):])
		off += p
	}
	ep := t[off:]
	clear(ep)
	ep[0] = lateStatusComplete
	fw.out = append(fw.out, fw.tx.seal(t))
}

// flatten concatenates buffers (for small handshake frames that must
// also be recorded for the auth signature).
func flatten(bufs net.Buffers) []byte {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	out := make([]byte, 0, n)
	for _, b := range bufs {
		out = append(out, b...)
	}
	return out
}
