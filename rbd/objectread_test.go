package rbd

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestReadIntoDirtyBuffer reads into buffers full of garbage, as image
// reads land straight in the caller's buffer: bytes past a short
// object's end, of missing objects and of a clone's objects that read
// through to the parent must all be overwritten.
func TestReadIntoDirtyBuffer(t *testing.T) {
	ctx := ctxT(t)
	r := rand.New(rand.NewPCG(21, 22))
	parent := imageName(t)
	const size = 12 << 20
	data := make([]byte, size)
	copy(data[4<<20:], randBytes(r, 3<<20)) // object 1 short, object 2 missing in the parent
	rbdImport(t, data, "rbd/"+parent)
	rbdCLI(t, "snap", "create", "rbd/"+parent+"@base")
	rbdCLI(t, "snap", "protect", "rbd/"+parent+"@base")
	child := imageName(t)
	if err := Clone(ctx, testPool(t), parent, "base", testPool(t), child, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, child, OpenOptions{})
	model := append([]byte(nil), data...)
	p := randBytes(r, 1000)
	if _, err := img.WriteAtContext(ctx, p, 8<<20+5); err != nil { // object 2 of the clone: short
		t.Fatal(err)
	}
	copy(model[8<<20+5:], p)
	views := map[string]*Image{"clone": img, "parent": openT(t, parent, OpenOptions{ReadOnly: true})}
	for name, v := range views {
		want := model
		if name == "parent" {
			want = data
		}
		for _, rd := range [][2]int{{0, size}, {4 << 20, 4 << 20}, {8 << 20, 4 << 20}, {7<<20 - 4096, 8192}, {3 << 20, 6 << 20}, {8<<20 + 4096, 4096}} {
			off, n := rd[0], rd[1]
			buf := bytes.Repeat([]byte{0xa5}, n)
			if got, err := v.ReadAtContext(ctx, buf, int64(off)); err != nil || got != n {
				t.Fatalf("%s: read [%d,+%d): %d, %v", name, off, n, got, err)
			}
			mustEqual(t, name+" read into a dirty buffer", buf, want[off:off+n])
		}
	}
}
