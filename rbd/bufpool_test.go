package rbd

import (
	"testing"
	"unsafe"
)

func TestBufferPoolCarvesDisjointBuffers(t *testing.T) {
	p := bufferPool{limit: 1 << 20}
	seen := map[uintptr]bool{}
	var bufs [][]byte
	// more than one slab of 4 KiB buffers, and a few other classes
	for i := 0; i < slabSize/4096+3; i++ {
		bufs = append(bufs, p.get(4096))
	}
	bufs = append(bufs, p.get(1), p.get(5000), p.get(3<<20), p.get(4<<20))
	for i, b := range bufs {
		if cap(b) != 1<<(bufClass(len(b))+minBufShift) {
			t.Fatalf("buffer %d: len %d cap %d, want its class's size", i, len(b), cap(b))
		}
		a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if seen[a] {
			t.Fatalf("buffer %d handed out twice", i)
		}
		seen[a] = true
		b[0], b[len(b)-1] = byte(i), byte(i)
	}
	for i, b := range bufs {
		if b[0] != byte(i) || b[len(b)-1] != byte(i) {
			t.Fatalf("buffer %d overlaps another", i)
		}
	}
	if a := uintptr(unsafe.Pointer(unsafe.SliceData(bufs[0]))); a%hugePageSize != 0 {
		t.Errorf("first buffer of a slab at %#x, not on a huge page boundary", a)
	}
}

func TestBufferPoolReusesUpToLimit(t *testing.T) {
	p := bufferPool{limit: 8192}
	a, b, c := p.get(4096), p.get(4096), p.get(4096)
	p.put(a)
	p.put(b)
	p.put(c) // over the limit: dropped
	if p.kept != 8192 {
		t.Fatalf("kept %d bytes, want 8192", p.kept)
	}
	got := map[*byte]bool{unsafe.SliceData(p.get(100)): true, unsafe.SliceData(p.get(4096)): true}
	if !got[unsafe.SliceData(a)] || !got[unsafe.SliceData(b)] {
		t.Error("kept buffers not handed out again")
	}
	if x := p.get(10); len(x) != 10 || cap(x) != 4096 {
		t.Errorf("fresh buffer len %d cap %d", len(x), cap(x))
	}
	p.put(make([]byte, 3000)) // not a class size: ignored
	p.drop()
	if p.kept != 0 || p.free != nil || p.rest != nil {
		t.Error("drop kept something")
	}
}
