package rbd

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestObjectMapRebuild breaks an image's object map behind its back (a
// data object written with rados, one removed), checks it (found
// invalid, as librbd's check finds it), rebuilds it, and compares the
// rebuilt head and snapshot maps byte for byte with what librbd's
// rebuild writes; librbd's check then passes, also after later writes.
func TestObjectMapRebuild(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	if err := Create(ctx, testPool(t), name, 8<<20, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{})
	r := rand.New(rand.NewPCG(3, 4))
	for _, off := range []int64{0, 3 << 20, 4<<20 + 100} {
		if _, err := img.WriteAtContext(ctx, randBytes(r, 200000), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := img.CreateSnapshot(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := img.WriteAtContext(ctx, randBytes(r, 4096), 6<<20); err != nil {
		t.Fatal(err)
	}
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}
	id := img.ID()
	snapID := img.hdr.Load().snapc.Snaps[0]
	pool := testPool(t)
	if err := pool.WriteFull(ctx, fmt.Sprintf("rbd_data.%s.%016x", id, 7), []byte("stray")); err != nil {
		t.Fatal(err)
	}
	if err := pool.Remove(ctx, fmt.Sprintf("rbd_data.%s.%016x", id, 6)); err != nil {
		t.Fatal(err)
	}

	img = openT(t, name, OpenOptions{ObjectMapRepair: true})
	if valid, err := img.CheckObjectMap(ctx, nil); err != nil || valid {
		t.Fatalf("check of a broken map: valid %v, %v", valid, err)
	}
	if info := rbdInfo(t, spec); fmt.Sprint(info["flags"]) != "[object map invalid fast diff invalid]" {
		t.Errorf("flags after a failed check: %v", info["flags"])
	}
	var calls, last uint64
	err := img.RebuildObjectMap(ctx, func(done, total uint64) { calls, last = calls+1, done })
	if err != nil || calls == 0 || last != 8 {
		t.Fatalf("rebuild: %v (progress %d calls, last %d)", err, calls, last)
	}
	if valid, err := img.CheckObjectMap(ctx, nil); err != nil || !valid {
		t.Fatalf("check after rebuild: valid %v, %v", valid, err)
	}
	snap := openT(t, name, OpenOptions{Snapshot: "s"})
	if err := snap.RebuildObjectMap(ctx, nil); err != nil {
		t.Fatal(err)
	}
	maps := func() [2][]byte {
		var out [2][]byte
		for i, oid := range []string{objectMapObject(id, noSnap), objectMapObject(id, snapID)} {
			p := make([]byte, 4096)
			n, err := pool.Read(ctx, oid, p, 0)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = p[:n]
		}
		return out
	}
	ours := maps()
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "object-map", "check", spec)
	rbdCLI(t, "object-map", "check", spec+"@s")
	if info := rbdInfo(t, spec); fmt.Sprint(info["flags"]) != "[]" {
		t.Errorf("flags after rebuild and librbd's check: %v", info["flags"])
	}
	rbdCLI(t, "object-map", "rebuild", spec)
	rbdCLI(t, "object-map", "rebuild", spec+"@s")
	theirs := maps()
	for i := range ours {
		if !bytes.Equal(ours[i], theirs[i]) {
			t.Errorf("object map %d: purerbd rebuilt %x, librbd %x", i, ours[i], theirs[i])
		}
	}
	// the rebuilt map is kept current by later writes
	img = openT(t, name, OpenOptions{})
	if _, err := img.WriteAtContext(ctx, randBytes(r, 100), 2<<20); err != nil {
		t.Fatal(err)
	}
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "object-map", "check", spec)
	if info := rbdInfo(t, spec); fmt.Sprint(info["flags"]) != "[]" {
		t.Errorf("flags after writing: %v", info["flags"])
	}
}
