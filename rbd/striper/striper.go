// Package striper maps byte ranges of an RBD image onto its data objects
// the way Ceph's Striper does (file_to_extents): the image is cut into
// stripe units dealt round-robin across stripe_count objects of an
// object set, each object holding object_size/stripe_unit units.
package striper

import (
	"errors"
	"fmt"
	"sort"
)

// Layout is an image's striping: object size, stripe unit and stripe
// count (the default layout is unit = object size, count = 1).
type Layout struct {
	ObjectSize  uint64
	StripeUnit  uint64
	StripeCount uint64
}

// ErrLayout reports a layout Ceph would refuse.
var ErrLayout = errors.New("striper: invalid layout")

// Simple returns the default layout for objects of 1<<order bytes.
func Simple(order uint8) Layout {
	s := uint64(1) << order
	return Layout{ObjectSize: s, StripeUnit: s, StripeCount: 1}
}

// Validate checks what librbd checks: all fields set, the stripe unit
// divides the object size.
func (l Layout) Validate() error {
	switch {
	case l.ObjectSize == 0 || l.StripeUnit == 0 || l.StripeCount == 0:
		return fmt.Errorf("%w: %+v has a zero field", ErrLayout, l)
	case l.StripeUnit > l.ObjectSize || l.ObjectSize%l.StripeUnit != 0:
		return fmt.Errorf("%w: stripe unit %d does not divide object size %d", ErrLayout, l.StripeUnit, l.ObjectSize)
	}
	return nil
}

// Period is the bytes of image covered by one object set.
func (l Layout) Period() uint64 { return l.ObjectSize * l.StripeCount }

// IsSimple reports whether the layout is the trivial one (one object
// after another).
func (l Layout) IsSimple() bool { return l.StripeCount == 1 }

// BufferRange is a piece of the caller's buffer.
type BufferRange struct {
	Offset, Length uint64
}

// ObjectExtent is a contiguous range within one object and the pieces of
// the image range (as offsets into the caller's buffer, which starts at
// the image offset asked for) that it holds, in object order.
type ObjectExtent struct {
	ObjectNo uint64
	Offset   uint64 // within the object
	Length   uint64
	Buffer   []BufferRange
}

// MapExtents maps the image range [off, off+length) onto objects. The
// result holds one extent per object and contiguous object range, sorted
// by object number then offset; the buffer ranges of all extents cover
// [0, length) exactly once.
func (l Layout) MapExtents(off, length uint64) []ObjectExtent {
	if length == 0 {
		return nil
	}
	if l.StripeCount == 1 {
		return l.mapSimple(off, length)
	}
	return l.mapStriped(off, length)
}

// mapSimple maps without fancy striping: every object holds one
// contiguous range of the image, so each extent is one contiguous piece
// of the buffer (two allocations per call, whatever the extent count;
// one for a range within one object, the most common).
func (l Layout) mapSimple(off, length uint64) []ObjectExtent {
	osz := l.ObjectSize
	n := (off%osz + length + osz - 1) / osz
	if n == 1 {
		one := &struct {
			x   [1]ObjectExtent
			buf [1]BufferRange
		}{}
		one.buf[0] = BufferRange{0, length}
		one.x[0] = ObjectExtent{ObjectNo: off / osz, Offset: off % osz, Length: length, Buffer: one.buf[:]}
		return one.x[:]
	}
	out := make([]ObjectExtent, 0, n)
	bufs := make([]BufferRange, n)
	var bufOff uint64
	for left := length; left > 0; {
		xoff := off % osz
		m := min(left, osz-xoff)
		i := len(out)
		bufs[i] = BufferRange{bufOff, m}
		out = append(out, ObjectExtent{ObjectNo: off / osz, Offset: xoff, Length: m, Buffer: bufs[i : i+1 : i+1]})
		off += m
		bufOff += m
		left -= m
	}
	return out
}

// mapStriped is the general mapping, stripe unit by stripe unit.
func (l Layout) mapStriped(off, length uint64) []ObjectExtent {
	su, sc := l.StripeUnit, l.StripeCount
	stripesPerObject := l.ObjectSize / su
	var out []ObjectExtent
	byObj := map[uint64]int{} // object -> index of its last extent
	var bufOff uint64
	for left := length; left > 0; {
		blockno := off / su
		stripeno := blockno / sc
		stripepos := blockno % sc
		objectsetno := stripeno / stripesPerObject
		objectno := objectsetno*sc + stripepos
		blockStart := (stripeno % stripesPerObject) * su
		blockOff := off % su
		n := min(left, su-blockOff)
		xoff := blockStart + blockOff

		if i, ok := byObj[objectno]; ok && out[i].Offset+out[i].Length == xoff {
			x := &out[i]
			x.Length += n
			last := &x.Buffer[len(x.Buffer)-1]
			if last.Offset+last.Length == bufOff {
				last.Length += n
			} else {
				x.Buffer = append(x.Buffer, BufferRange{bufOff, n})
			}
		} else {
			out = append(out, ObjectExtent{ObjectNo: objectno, Offset: xoff, Length: n,
				Buffer: []BufferRange{{bufOff, n}}})
			byObj[objectno] = len(out) - 1
		}
		off += n
		bufOff += n
		left -= n
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].ObjectNo != out[j].ObjectNo {
			return out[i].ObjectNo < out[j].ObjectNo
		}
		return out[i].Offset < out[j].Offset
	})
	return out
}

// NumObjects is Striper::get_num_objects: how many objects an image of
// size bytes spans.
func (l Layout) NumObjects(size uint64) uint64 {
	su, sc := l.StripeUnit, l.StripeCount
	period := l.Period()
	numPeriods := (size + period - 1) / period
	rem := size % period
	var remObjs uint64
	if rem > 0 && rem < sc*su {
		remObjs = sc - (rem+su-1)/su
	}
	return numPeriods*sc - remObjs
}

// ImageOffset is the inverse mapping: the image offset of byte off of
// object objectno (Striper::get_file_offset).
func (l Layout) ImageOffset(objectno, off uint64) uint64 {
	su, sc := l.StripeUnit, l.StripeCount
	stripesPerObject := l.ObjectSize / su
	objectsetno := objectno / sc
	stripepos := objectno % sc
	stripeno := objectsetno*stripesPerObject + off/su
	blockno := stripeno*sc + stripepos
	return blockno*su + off%su
}

// ObjectName returns the name of data object objectno for an image whose
// object prefix is prefix ("rbd_data.<id>"): prefix.%016x.
func ObjectName(prefix string, objectno uint64) string {
	const digits = "0123456789abcdef"
	// built on the stack when the name fits (RBD's prefixes do), so the
	// string is the only allocation
	var stack [64]byte
	var b []byte
	if n := len(prefix) + 17; n <= len(stack) {
		b = stack[:n]
	} else {
		b = make([]byte, n)
	}
	copy(b, prefix)
	b[len(prefix)] = '.'
	for i := len(b) - 1; i > len(prefix); i-- {
		b[i] = digits[objectno&0xf]
		objectno >>= 4
	}
	return string(b)
}
