// Package objectmap implements RBD's object map: Ceph's BitVector<2>
// encoding (header, packed 2-bit states, CRC footer) and the object
// states librbd keeps in rbd_object_map.<image id>[.<snap id>].
//
// An image with the object-map feature has one state per data object;
// librbd trusts the map on reads (a NONEXISTENT object is never read), so
// every writer must mark an object EXISTS before writing to it.
package objectmap

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/crc32c"
	"github.com/purerbd/purerbd/rados/denc"
)

// Object states.
const (
	Nonexistent uint8 = 0
	Exists      uint8 = 1
	Pending     uint8 = 2
	ExistsClean uint8 = 3
)

// StateName names a state as `rbd object-map` tools do.
func StateName(s uint8) string {
	switch s {
	case Nonexistent:
		return "nonexistent"
	case Exists:
		return "exists"
	case Pending:
		return "pending"
	case ExistsClean:
		return "exists_clean"
	}
	return fmt.Sprintf("invalid(%d)", s)
}

// BlockSize is the span of data bytes each CRC covers.
const BlockSize = 4096

const perByte = 4 // 2-bit elements per byte

// BitVector is Ceph's BitVector<2>: n 2-bit elements, element i in byte
// i/4 at bit shift 6-2*(i%4) (the first element in the high bits).
type BitVector struct {
	size uint64
	data []byte
	// NoCRC makes Encode write an empty footer (what object_map_save and
	// object_map_snap_remove take as input).
	NoCRC bool
}

// New returns a vector of n elements, all 0 (Nonexistent).
func New(n uint64) *BitVector {
	b := &BitVector{}
	b.Resize(n)
	return b
}

// Len returns the number of elements.
func (b *BitVector) Len() uint64 { return b.size }

// Bytes returns the packed data (len = ceil(Len/4)); it aliases b.
func (b *BitVector) Bytes() []byte { return b.data }

// Resize changes the number of elements; new ones are 0, and bits of
// dropped elements in the last byte are cleared.
func (b *BitVector) Resize(n uint64) {
	nb := (n + perByte - 1) / perByte
	if nb > uint64(len(b.data)) {
		b.data = append(b.data, make([]byte, nb-uint64(len(b.data)))...)
	} else {
		b.data = b.data[:nb]
	}
	// Ceph keeps stale bits of dropped elements in the last byte; clear
	// them only when growing back over them.
	if n > b.size {
		for i := b.size; i < n && i%perByte != 0; i++ {
			b.set(i, 0)
		}
	}
	b.size = n
}

func index(i uint64) (byteIdx uint64, shift uint) {
	return i / perByte, uint((perByte-1)-(i%perByte)) * 2
}

// Get returns element i (0 when i is out of range).
func (b *BitVector) Get(i uint64) uint8 {
	if i >= b.size {
		return 0
	}
	bi, sh := index(i)
	return (b.data[bi] >> sh) & 3
}

// Set sets element i to v (low two bits); out-of-range i is ignored.
func (b *BitVector) Set(i uint64, v uint8) {
	if i >= b.size {
		return
	}
	b.set(i, v)
}

func (b *BitVector) set(i uint64, v uint8) {
	bi, sh := index(i)
	if bi >= uint64(len(b.data)) {
		return
	}
	b.data[bi] = b.data[bi]&^(3<<sh) | (v&3)<<sh
}

// Clone returns a deep copy.
func (b *BitVector) Clone() *BitVector {
	return &BitVector{size: b.size, data: append([]byte(nil), b.data...), NoCRC: b.NoCRC}
}

func (b *BitVector) header() []byte {
	e := denc.NewEncoder(nil)
	e.Versioned(1, 1, func(e *denc.Encoder) { e.U64(b.size) })
	return e.Bytes()
}

// Encode writes the vector as Ceph's BitVector::encode does.
func (b *BitVector) Encode(e *denc.Encoder) {
	h := b.header()
	e.Blob(h)
	e.Raw(b.data)
	if b.NoCRC {
		e.U32(0)
		return
	}
	blocks := (len(b.data) + BlockSize - 1) / BlockSize
	e.U32(uint32(8 + 4*blocks))
	e.U32(crc32c.Update(0, h))
	e.U32(uint32(blocks))
	for i := 0; i < blocks; i++ {
		end := min((i+1)*BlockSize, len(b.data))
		e.U32(crc32c.Update(0, b.data[i*BlockSize:end]))
	}
}

// Decode reads a BitVector and verifies its CRCs when it has them.
func (b *BitVector) Decode(d *denc.Decoder) {
	*b = BitVector{}
	h := d.Blob("BitVector header")
	if d.Err() != nil {
		return
	}
	hd := denc.NewDecoder(h)
	var size uint64
	hd.Versioned("BitVector header", 1, func(d *denc.Decoder, _ uint8) { size = d.U64("size") })
	hd.End("BitVector header")
	d.Adopt(hd)
	if d.Err() != nil {
		return
	}
	nb := (size + perByte - 1) / perByte
	if nb > uint64(d.Remaining()) {
		d.Failf("BitVector data", "%d elements need %d bytes, have %d", size, nb, d.Remaining())
		return
	}
	data := d.Raw("BitVector data", int(nb))
	footer := d.Blob("BitVector footer")
	if d.Err() != nil {
		return
	}
	b.size = size
	b.data = append([]byte(nil), data...)
	if len(footer) == 0 {
		b.NoCRC = true
		return
	}
	fd := denc.NewDecoder(footer)
	hcrc := fd.U32("header crc")
	blocks := fd.Count("data crcs", 4)
	want := (len(data) + BlockSize - 1) / BlockSize
	if fd.Err() == nil && blocks != want {
		fd.Failf("BitVector footer", "%d data CRCs for %d blocks", blocks, want)
	}
	if fd.Err() == nil && hcrc != crc32c.Update(0, h) {
		fd.Failf("BitVector footer", "header CRC %#08x, computed %#08x", hcrc, crc32c.Update(0, h))
	}
	for i := 0; i < blocks && fd.Err() == nil; i++ {
		c := fd.U32("data crc")
		end := min((i+1)*BlockSize, len(data))
		if got := crc32c.Update(0, data[i*BlockSize:end]); fd.Err() == nil && c != got {
			fd.Failf("BitVector footer", "block %d CRC %#08x, computed %#08x", i, c, got)
		}
	}
	fd.End("BitVector footer")
	d.Adopt(fd)
}

// Marshal encodes b.
func (b *BitVector) Marshal() []byte {
	e := denc.NewEncoder(nil)
	b.Encode(e)
	return e.Bytes()
}

// Unmarshal decodes exactly one BitVector from p.
func Unmarshal(p []byte) (*BitVector, error) {
	d := denc.NewDecoder(p)
	b := &BitVector{}
	b.Decode(d)
	d.End("BitVector")
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("objectmap: %w", err)
	}
	return b, nil
}
