package kernel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// The xz container (https://tukaani.org/xz/xz-file-format.txt), as far as
// xzCheck reads it.
var (
	xzHeaderMagic = []byte{0xfd, '7', 'z', 'X', 'Z', 0}
	xzFooterMagic = []byte{'Y', 'Z'}
)

const (
	xzHeaderSize  = 12
	xzFooterSize  = 12
	xzFilterLZMA2 = 0x21
)

// errXZLayout is xzCheck's answer for a file that is not one plain xz
// stream of LZMA2 blocks.
var errXZLayout = errors.New("not a single xz stream")

// xzCheck reads the layout of an xz file before it is decoded: the file
// must be exactly one stream (optionally followed by stream padding),
// every block's LZMA2 dictionary at most maxModuleSize (the decoder
// allocates the dictionary a header asks for, up to 4 GiB, and a module
// needs none larger than itself), and the uncompressed sizes its index
// lists add up to at most limit. It returns that sum and the largest dictionary.
// Checksums are left to the decoder.
func xzCheck(b []byte, limit int64) (total, dict int64, err error) {
	if len(b) < xzHeaderSize+xzFooterSize || !bytes.HasPrefix(b, xzHeaderMagic) {
		return 0, 0, fmt.Errorf("%w: no xz stream header", errXZLayout)
	}
	// stream padding: zero bytes in multiples of four
	end := len(b)
	for end >= 4 && end%4 == 0 && binary.LittleEndian.Uint32(b[end-4:]) == 0 {
		end -= 4
	}
	if end < xzHeaderSize+xzFooterSize {
		return 0, 0, fmt.Errorf("%w: too short", errXZLayout)
	}
	footer := b[end-xzFooterSize : end]
	if !bytes.Equal(footer[10:], xzFooterMagic) {
		return 0, 0, fmt.Errorf("%w: no stream footer at the end", errXZLayout)
	}
	// the footer's stream flags repeat the header's
	if !bytes.Equal(footer[8:10], b[6:8]) {
		return 0, 0, fmt.Errorf("%w: stream header and footer disagree", errXZLayout)
	}
	indexSize := (int64(binary.LittleEndian.Uint32(footer[4:8])) + 1) * 4
	indexStart := int64(end-xzFooterSize) - indexSize
	if indexStart < xzHeaderSize {
		return 0, 0, fmt.Errorf("%w: index size %d beyond the file", errXZLayout, indexSize)
	}
	index := b[indexStart : end-xzFooterSize]
	if index[0] != 0 {
		return 0, 0, fmt.Errorf("%w: no index", errXZLayout)
	}
	p := 1
	records, ok := xzVarint(index, &p)
	if !ok || records > uint64(len(index)) {
		return 0, 0, fmt.Errorf("%w: bad index", errXZLayout)
	}
	// the blocks lie back to back from the stream header to the index
	blockStart := int64(xzHeaderSize)
	for range records {
		unpadded, ok1 := xzVarint(index, &p)
		uncompressed, ok2 := xzVarint(index, &p)
		if !ok1 || !ok2 || unpadded == 0 || unpadded > uint64(indexStart) {
			return 0, 0, fmt.Errorf("%w: bad index record", errXZLayout)
		}
		if uncompressed > uint64(limit) || total+int64(uncompressed) > limit {
			return 0, 0, ErrModuleTooLarge
		}
		total += int64(uncompressed)
		if blockStart >= indexStart {
			return 0, 0, fmt.Errorf("%w: more index records than blocks", errXZLayout)
		}
		d, err := xzCheckBlockHeader(b[blockStart:indexStart])
		if err != nil {
			return 0, 0, err
		}
		dict = max(dict, d)
		blockStart += (int64(unpadded) + 3) &^ 3
	}
	// index padding up to four bytes, then its CRC32
	if p > len(index)-4 || (p+4+3)&^3 != len(index) {
		return 0, 0, fmt.Errorf("%w: index size does not match its records", errXZLayout)
	}
	if blockStart != indexStart {
		return 0, 0, fmt.Errorf("%w: blocks and index do not meet (more than one stream?)", errXZLayout)
	}
	return total, dict, nil
}

// xzCheckBlockHeader checks the LZMA2 dictionary size a block header
// asks for.
func xzCheckBlockHeader(b []byte) (int64, error) {
	if len(b) == 0 || b[0] == 0 {
		return 0, fmt.Errorf("%w: no block header", errXZLayout)
	}
	size := (int(b[0]) + 1) * 4
	if size > len(b) {
		return 0, fmt.Errorf("%w: block header beyond the blocks", errXZLayout)
	}
	h := b[:size-4] // without its CRC32
	flags := h[1]
	if flags&0x3c != 0 {
		return 0, fmt.Errorf("%w: reserved block flags %#x", errXZLayout, flags)
	}
	p := 2
	var dict int64
	for _, present := range []bool{flags&0x40 != 0, flags&0x80 != 0} { // compressed, uncompressed size
		if present {
			if _, ok := xzVarint(h, &p); !ok {
				return 0, fmt.Errorf("%w: bad block header", errXZLayout)
			}
		}
	}
	for range int(flags&3) + 1 {
		id, ok1 := xzVarint(h, &p)
		propSize, ok2 := xzVarint(h, &p)
		if !ok1 || !ok2 || propSize > uint64(len(h)-p) {
			return 0, fmt.Errorf("%w: bad filter flags", errXZLayout)
		}
		props := h[p : p+int(propSize)]
		p += int(propSize)
		if id != xzFilterLZMA2 {
			continue // the decoder refuses what it does not know
		}
		if len(props) != 1 || props[0] > 40 {
			return 0, fmt.Errorf("%w: bad LZMA2 properties", errXZLayout)
		}
		d := xzDictSize(props[0])
		if d > maxModuleSize {
			return 0, ErrModuleTooLarge
		}
		dict = max(dict, int64(d))
	}
	return dict, nil
}

// xzDictSize decodes an LZMA2 dictionary size (0 to 40).
func xzDictSize(code byte) uint64 {
	if code >= 40 {
		return 1<<32 - 1
	}
	return uint64(2|code&1) << (code/2 + 11)
}

// xzVarint reads a multibyte integer (seven bits a byte, at most nine
// bytes) from b at *p, advancing *p.
func xzVarint(b []byte, p *int) (uint64, bool) {
	var v uint64
	for i := 0; i < 9; i++ {
		if *p >= len(b) {
			return 0, false
		}
		c := b[*p]
		*p++
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v, i == 0 || c != 0
		}
	}
	return 0, false
}
