package msgr

import (
	"encoding/binary"
	"net"
)

// keepScratch bounds the secure-mode scratch buffer kept between frames.
const keepScratch = 8 << 20

// frameWriter encodes frames in crc mode (tx nil) or secure mode. The
// buffers it returns stay valid until the next call. Used by one goroutine
// at a time.
type frameWriter struct {
	tx   *gcmState
	head []byte
	tail []byte
	bufs [6][]byte
}

// grow returns b resliced to n bytes, reallocating when too small.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n, n+n/4)
	}
	return b[:n]
}

// build encodes a frame with tag and segments (control, front, middle,
// data) and returns it as buffers ready for writev. The front, middle and
// data slices are referenced, not copied, in crc mode.
func (fw *frameWriter) build(tag uint8, segs *[maxSegments][]byte) net.Buffers {
	var pr preamble
	pr.tag = tag
	for i := range segs {
		pr.lens[i] = uint32(len(segs[i]))
	}
	pr.nseg = segmentCount(pr.lens)
	if fw.tx != nil {
		return fw.buildSecure(&pr, segs)
	}
	return fw.buildPlain(&pr, segs)
}

func (fw *frameWriter) buildPlain(pr *preamble, segs *[maxSegments][]byte) net.Buffers {
	n := len(segs[0])
	hlen := preambleLen + n + crcLen
	fw.head = grow(fw.head, hlen+epiloguePlainLen)
	h := fw.head
	pr.encode(h)
	copy(h[preambleLen:], segs[0])
	binary.LittleEndian.PutUint32(h[preambleLen+n:], crc32c(^uint32(0), segs[0]))
	out := append(fw.bufs[:0], h[:hlen])
	if !pr.hasTail() {
		return out
	}
	ep := h[hlen : hlen+epiloguePlainLen]
	ep[0] = lateStatusComplete
	for i := 1; i < maxSegments; i++ {
		c := uint32(0)
		if i < pr.nseg {
			c = crc32c(^uint32(0), segs[i])
		}
		binary.LittleEndian.PutUint32(ep[1+4*(i-1):], c)
		if len(segs[i]) > 0 {
			out = append(out, segs[i])
		}
	}
	return append(out, ep)
}

func (fw *frameWriter) buildSecure(pr *preamble, segs *[maxSegments][]byte) net.Buffers {
	n := len(segs[0])
	hlen := preambleSecureLen
	rem := 0
	if n > inlineLen {
		rem = n - inlineLen
		hlen += int(padded(uint32(rem))) + gcmTagLen
	}
	fw.head = grow(fw.head, hlen)
	h := fw.head
	pr.encode(h)
	inl := h[preambleLen : preambleLen+inlineLen]
	clear(inl[copy(inl, segs[0]):])
	fw.tx.seal(h[:preambleLen+inlineLen])
	if rem > 0 {
		r := h[preambleSecureLen : preambleSecureLen+int(padded(uint32(rem)))]
		clear(r[copy(r, segs[0][inlineLen:]):])
		fw.tx.seal(r)
	}
	out := append(fw.bufs[:0], h[:hlen])
	if !pr.hasTail() {
		return out
	}
	size := epilogueSecureLen - gcmTagLen
	for i := 1; i < maxSegments; i++ {
		size += int(padded(uint32(len(segs[i]))))
	}
	fw.tail = grow(fw.tail, size+gcmTagLen)
	t := fw.tail[:size]
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
	sealed := fw.tx.seal(t)
	out = append(out, sealed)
	return out
}

// release drops an oversized secure scratch buffer once a frame is out.
func (fw *frameWriter) release() {
	if cap(fw.tail) > keepScratch {
		fw.tail = nil
	}
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
