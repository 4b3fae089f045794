package striper

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// byteMap maps one image byte with Ceph's formula, independently of
// MapExtents' merging.
func byteMap(l Layout, off uint64) (objectno, objoff uint64) {
	blockno := off / l.StripeUnit
	stripeno := blockno / l.StripeCount
	stripepos := blockno % l.StripeCount
	objectsetno := stripeno / (l.ObjectSize / l.StripeUnit)
	objectno = objectsetno*l.StripeCount + stripepos
	objoff = (stripeno%(l.ObjectSize/l.StripeUnit))*l.StripeUnit + off%l.StripeUnit
	return
}

var layouts = []Layout{
	Simple(12),
	{ObjectSize: 4096, StripeUnit: 1024, StripeCount: 1},
	{ObjectSize: 4096, StripeUnit: 1024, StripeCount: 3},
	{ObjectSize: 8192, StripeUnit: 512, StripeCount: 5},
	{ObjectSize: 4096, StripeUnit: 4096, StripeCount: 4},
}

func TestMapExtentsMatchesPerByte(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, l := range layouts {
		if err := l.Validate(); err != nil {
			t.Fatal(err)
		}
		for range 200 {
			off := r.Uint64N(5 * l.Period())
			n := 1 + r.Uint64N(3*l.Period())
			covered := make([]bool, n)
			for _, x := range l.MapExtents(off, n) {
				o := x.Offset
				var sum uint64
				for _, br := range x.Buffer {
					for i := uint64(0); i < br.Length; i++ {
						if covered[br.Offset+i] {
							t.Fatalf("%+v: buffer byte %d twice", l, br.Offset+i)
						}
						covered[br.Offset+i] = true
						obj, oo := byteMap(l, off+br.Offset+i)
						if obj != x.ObjectNo || oo != o {
							t.Fatalf("%+v off %d: byte %d in object %d at %d, want %d at %d", l, off, br.Offset+i, x.ObjectNo, o, obj, oo)
						}
						if l.ImageOffset(obj, oo) != off+br.Offset+i {
							t.Fatalf("ImageOffset(%d,%d) wrong", obj, oo)
						}
						o++
					}
					sum += br.Length
				}
				if sum != x.Length {
					t.Fatalf("extent length %d, buffer %d", x.Length, sum)
				}
			}
			for i, c := range covered {
				if !c {
					t.Fatalf("%+v: buffer byte %d not covered", l, i)
				}
			}
		}
	}
}

func TestNumObjects(t *testing.T) {
	for _, l := range layouts {
		for size := uint64(0); size < 4*l.Period(); size += l.StripeUnit / 2 {
			var want uint64
			for off := uint64(0); off < size; off += 256 {
				if o, _ := byteMap(l, off); o+1 > want {
					want = o + 1
				}
			}
			if got := l.NumObjects(size); got != want {
				t.Errorf("%+v size %d: %d objects, want %d", l, size, got, want)
			}
		}
	}
	if ObjectName("rbd_data.1234", 0x1f) != "rbd_data.1234.000000000000001f" {
		t.Error(ObjectName("rbd_data.1234", 0x1f))
	}
}

// TestMapSimpleMatchesStriped checks the fast path for layouts without
// fancy striping against the general mapping, extent for extent.
func TestMapSimpleMatchesStriped(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, l := range []Layout{Simple(12), Simple(22), {ObjectSize: 4096, StripeUnit: 1024, StripeCount: 1}} {
		for range 500 {
			off := r.Uint64N(5 * l.ObjectSize)
			n := 1 + r.Uint64N(3*l.ObjectSize)
			if r.IntN(4) == 0 { // aligned, as most I/O is
				off, n = off/l.ObjectSize*l.ObjectSize, max(n/l.ObjectSize, 1)*l.ObjectSize
			}
			got, want := l.mapSimple(off, n), l.mapStriped(off, n)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%+v [%d,+%d): simple %v, striped %v", l, off, n, got, want)
			}
		}
	}
}

func TestObjectName(t *testing.T) {
	for _, n := range []uint64{0, 1, 0xabc, 1<<64 - 1} {
		if got, want := ObjectName("rbd_data.1234", n), fmt.Sprintf("rbd_data.1234.%016x", n); got != want {
			t.Errorf("ObjectName(%d) = %q, want %q", n, got, want)
		}
	}
}
