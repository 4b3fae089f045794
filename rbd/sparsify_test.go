package rbd

import (
	"bytes"
	"strings"
	"testing"
)

// TestSparsify: zeros written by purerbd are deallocated (an object of
// zeros removed, a zeroed tail truncated, librbd's rbd diff no longer
// listing them), the data reads the same through librbd, and in a clone
// an object of zeros over the parent's data stays, or the parent would
// show through.
func TestSparsify(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	rbdCLI(t, "create", "--size", "4M", "--object-size", "1M", "rbd/"+name)
	img := openT(t, name, OpenOptions{})
	data := append(bytes.Repeat([]byte{7}, 4096), make([]byte, 2<<20-4096)...)
	if _, err := img.WriteAtContext(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := img.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := img.Sparsify(ctx, 4096, nil); err != nil {
		t.Fatal(err)
	}
	if err := img.Sparsify(ctx, 1000, nil); err == nil {
		t.Error("a sparse size of 1000 accepted")
	}
	want := append(data, make([]byte, 2<<20)...)
	mustEqual(t, "rbd export after sparsify", rbdExport(t, "rbd/"+name), want)
	if diff := string(rbdCLI(t, "diff", "rbd/"+name)); strings.Join(strings.Fields(diff), " ") != "Offset Length Type 0 4096 data" {
		t.Errorf("rbd diff after sparsify:\n%s", diff)
	}
	rbdCLI(t, "object-map", "check", "rbd/"+name)

	// a clone's object of zeros hides its parent's data
	rbdCLI(t, "snap", "create", "rbd/"+name+"@s")
	rbdCLI(t, "snap", "protect", "rbd/"+name+"@s")
	child := imageName(t)
	if err := Clone(ctx, testPool(t), name, "s", testPool(t), child, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cimg := openT(t, child, OpenOptions{})
	if _, err := cimg.WriteAtContext(ctx, make([]byte, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	if err := cimg.Sparsify(ctx, 4096, func(done, total uint64) {}); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "rbd export of the sparsified clone", rbdExport(t, "rbd/"+child), make([]byte, 4<<20))
}
