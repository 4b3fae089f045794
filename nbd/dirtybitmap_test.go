package nbd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// bitmapDisk is a memory disk with fixed dirty bitmaps: each a list of
// dirty ranges (offset, length) in order.
type bitmapDisk struct {
	*nbd.Memory
	bitmaps map[string][][2]int64
}

func (b bitmapDisk) DirtyBitmaps(context.Context) ([]string, error) {
	var names []string
	for n := range b.bitmaps {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// DirtyStatus answers in small pieces (at most two extents a call), to
// exercise the server's gathering.
func (b bitmapDisk) DirtyStatus(_ context.Context, name string, off, length int64) ([]nbd.DirtyExtent, error) {
	ranges, ok := b.bitmaps[name]
	if !ok {
		return nil, fmt.Errorf("no bitmap %q", name)
	}
	var out []nbd.DirtyExtent
	pos := off
	for _, r := range ranges {
		if len(out) >= 2 || pos >= off+length {
			break
		}
		if r[0]+r[1] <= pos {
			continue
		}
		if r[0] > pos {
			out = append(out, nbd.DirtyExtent{Length: r[0] - pos})
			pos = r[0]
		}
		out = append(out, nbd.DirtyExtent{Length: r[0] + r[1] - pos, Dirty: true})
		pos = r[0] + r[1]
	}
	if len(out) == 0 {
		out = append(out, nbd.DirtyExtent{Length: b.Size() - pos})
	}
	return out, nil
}

// TestDirtyBitmapContexts serves a disk with two dirty bitmaps and reads
// them with real clients: nbdinfo lists the qemu:dirty-bitmap: contexts
// beside base:allocation and maps one (--map=CONTEXT), qemu-img map
// reads the other through x-dirty-bitmap (qemu reports a dirty range as
// a hole, the clean ones as data, its documented inversion).
func TestDirtyBitmapContexts(t *testing.T) {
	nbdinfo := nbdtest.RequireTool(t, "nbdinfo", "libnbd-bin")
	qemuImg := nbdtest.RequireTool(t, "qemu-img", "qemu-utils")
	mem, err := nbd.NewMemory(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	disk := bitmapDisk{Memory: mem, bitmaps: map[string][][2]int64{
		"monday":  {{0, 64 << 10}, {1 << 20, 4 << 20}},
		"tuesday": {{2<<20 + 4096, 8192}},
	}}
	srv := nbdtest.Start(t, nbd.Config{Exports: []*nbd.Export{{Name: "disk", Backend: disk}}})
	uri := srv.URI("disk")

	out := run(t, nbdinfo, "--json", uri)
	var info struct {
		Exports []struct {
			Contexts []string `json:"contexts"`
		} `json:"exports"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil || len(info.Exports) != 1 {
		t.Fatalf("nbdinfo --json: %v\n%s", err, out)
	}
	if got, want := info.Exports[0].Contexts, []string{"base:allocation", "qemu:dirty-bitmap:monday", "qemu:dirty-bitmap:tuesday"}; !slices.Equal(got, want) {
		t.Errorf("contexts %v, want %v", got, want)
	}

	out = run(t, nbdinfo, "--map=qemu:dirty-bitmap:monday", "--json", uri)
	var extents []struct {
		Offset int64 `json:"offset"`
		Length int64 `json:"length"`
		Type   int   `json:"type"`
	}
	if err := json.Unmarshal([]byte(out), &extents); err != nil {
		t.Fatalf("nbdinfo --map: %v\n%s", err, out)
	}
	var got [][3]int64
	for _, e := range extents {
		got = append(got, [3]int64{e.Offset, e.Length, int64(e.Type)})
	}
	want := [][3]int64{{0, 64 << 10, 1}, {64 << 10, 1<<20 - 64<<10, 0}, {1 << 20, 4 << 20, 1}, {5 << 20, 3 << 20, 0}}
	if !slices.Equal(got, want) {
		t.Errorf("nbdinfo --map=qemu:dirty-bitmap:monday: %v, want %v", got, want)
	}

	// qemu's client: the same bitmap protocol, another implementation
	out = run(t, qemuImg, "map", "--output=json", "--image-opts",
		"driver=nbd,server.type=unix,server.path="+srv.Socket+",export=disk,x-dirty-bitmap=qemu:dirty-bitmap:tuesday")
	var qm []struct {
		Start  int64 `json:"start"`
		Length int64 `json:"length"`
		Data   bool  `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &qm); err != nil {
		t.Fatalf("qemu-img map: %v\n%s", err, out)
	}
	var dirty [][2]int64
	for _, e := range qm {
		if !e.Data {
			dirty = append(dirty, [2]int64{e.Start, e.Length})
		}
	}
	if want := [][2]int64{{2<<20 + 4096, 8192}}; !slices.Equal(dirty, want) {
		t.Errorf("qemu-img map with x-dirty-bitmap: dirty %v, want %v\n%s", dirty, want, out)
	}
	// a bitmap the export does not offer is not negotiated: no map
	if out, err := exec.Command(nbdinfo, "--map=qemu:dirty-bitmap:friday", uri).CombinedOutput(); err == nil {
		t.Errorf("nbdinfo --map of a missing bitmap succeeded:\n%s", out)
	} else if !strings.Contains(string(out), "friday") {
		t.Logf("nbdinfo on a missing bitmap: %s", out)
	}
}
