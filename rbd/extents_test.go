package rbd

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rbd/striper"
)

// span is a half-open byte range.
type span struct{ off, end uint64 }

// normalise sorts and merges spans.
func normalise(s []span) []span {
	sort.Slice(s, func(i, j int) bool { return s[i].off < s[j].off })
	var out []span
	for _, x := range s {
		if x.end <= x.off {
			continue
		}
		if n := len(out); n > 0 && out[n-1].end >= x.off {
			out[n-1].end = max(out[n-1].end, x.end)
			continue
		}
		out = append(out, x)
	}
	return out
}

// TestAllocationsModel checks allocations() against a byte-by-byte model
// on random layouts, ranges, object sizes and parent overlaps.
func TestAllocationsModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		su := uint64(1) << (2 + r.IntN(3))
		l := striper.Layout{ObjectSize: su << r.IntN(3), StripeUnit: su, StripeCount: 1 + uint64(r.IntN(4))}
		size := 1 + uint64(r.IntN(int(4*l.Period())))
		objs := l.NumObjects(size)
		ends := make([]uint64, objs)
		for i := range ends {
			switch r.IntN(3) {
			case 0:
			case 1:
				ends[i] = l.ObjectSize
			default:
				ends[i] = uint64(r.IntN(int(l.ObjectSize) + 1))
			}
		}
		overlap := uint64(0)
		if r.IntN(2) == 0 {
			overlap = uint64(r.IntN(int(size) + 1))
		}
		off := uint64(r.IntN(int(size)))
		n := 1 + uint64(r.IntN(int(size-off)))
		exts := l.MapExtents(off, n)
		pieces := allocations(exts, off, overlap, func(i int) uint64 { return ends[exts[i].ObjectNo] })
		pos := off
		var calls int
		err := emitExtents(pieces, func(o, length int64, allocated bool) error {
			calls++
			if uint64(o) != pos || length <= 0 {
				return fmt.Errorf("extent %d+%d, expected one at %d", o, length, pos)
			}
			for b := uint64(o); b < uint64(o+length); b++ {
				x := l.MapExtents(b, 1)[0]
				want := x.Offset < ends[x.ObjectNo] || b < overlap
				if want != allocated {
					return fmt.Errorf("byte %d (object %d offset %d, end %d, overlap %d): allocated %v, want %v",
						b, x.ObjectNo, x.Offset, ends[x.ObjectNo], overlap, allocated, want)
				}
			}
			pos += uint64(length)
			return nil
		})
		if err == nil && pos != off+n {
			err = fmt.Errorf("extents end at %d, want %d", pos, off+n)
		}
		if err != nil {
			t.Fatalf("layout %+v size %d range %d+%d: %v", l, size, off, n, err)
		}
	}
}

// allocated collects an image's allocated spans through AllocatedExtents,
// walking the whole image and checking the extents are consecutive.
func allocated(t *testing.T, img *Image) []span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []span
	size := uint64(img.Size())
	for pos := uint64(0); pos < size; {
		start := pos
		err := img.AllocatedExtents(ctx, int64(pos), int64(size-pos), func(o, n int64, a bool) error {
			if uint64(o) != pos || n <= 0 {
				return fmt.Errorf("extent %d+%d, expected one at %d", o, n, pos)
			}
			if a {
				out = append(out, span{uint64(o), uint64(o + n)})
			}
			pos += uint64(n)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if pos == start {
			t.Fatalf("AllocatedExtents at %d reported nothing", pos)
		}
	}
	return normalise(out)
}

// rbdDiff is `rbd diff` (librbd) of spec as spans.
func rbdDiff(t *testing.T, spec string, args ...string) []span {
	t.Helper()
	var d []struct {
		Offset uint64 `json:"offset"`
		Length uint64 `json:"length"`
		Exists string `json:"exists"`
	}
	out := rbdCLI(t, append(append([]string{"diff", "--format", "json"}, args...), spec)...)
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("rbd diff: %v: %s", err, out)
	}
	var s []span
	for _, e := range d {
		if e.Exists == "true" {
			s = append(s, span{e.Offset, e.Offset + e.Length})
		}
	}
	return normalise(s)
}

// dataObjects lists the object numbers of the data objects with prefix.
func dataObjects(t *testing.T, prefix string) map[uint64]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := cluster.Rados(ctx, "-p", cluster.Pool, "ls")
	if err != nil {
		t.Fatal(err)
	}
	m := map[uint64]bool{}
	for _, line := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(line, prefix+"."); ok {
			var n uint64
			if _, err := fmt.Sscanf(rest, "%x", &n); err != nil {
				t.Fatalf("object %q: %v", line, err)
			}
			m[n] = true
		}
	}
	return m
}

// objectSize is `rados stat`'s size of data object o.
func objectSize(t *testing.T, prefix string, o uint64) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := cluster.Rados(ctx, "-p", cluster.Pool, "stat", striper.ObjectName(prefix, o))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	var size uint64
	if len(f) < 2 || f[len(f)-2] != "size" {
		t.Fatalf("rados stat: %q", out)
	}
	if _, err := fmt.Sscan(f[len(f)-1], &size); err != nil {
		t.Fatalf("rados stat: %q: %v", out, err)
	}
	return size
}

// objectsOf returns the objects whose bytes the spans touch.
func objectsOf(l striper.Layout, s []span) map[uint64]bool {
	m := map[uint64]bool{}
	for _, x := range s {
		for _, e := range l.MapExtents(x.off, x.end-x.off) {
			m[e.ObjectNo] = true
		}
	}
	return m
}

// writePattern writes a few ranges: inside an object, across an object
// boundary, at the very end, and one that it then discards again.
func writePattern(t *testing.T, img *Image, objSize int64) {
	t.Helper()
	ctx := context.Background()
	size := img.Size()
	for _, w := range []struct{ off, n int64 }{
		{objSize + 4096, 5000},
		{3*objSize - 100, 300},
		{size - 512, 512},
		{6 * objSize, objSize},
	} {
		p := make([]byte, w.n)
		for i := range p {
			p[i] = byte(i%251) + 1
		}
		if _, err := img.WriteAtContext(ctx, p, w.off); err != nil {
			t.Fatalf("write %d+%d: %v", w.off, w.n, err)
		}
	}
	if err := img.Discard(ctx, 6*objSize, objSize); err != nil {
		t.Fatal(err)
	}
}

// TestAllocatedExtentsAgainstRbdDiff compares AllocatedExtents with `rbd
// diff` and `rados ls` on images with and without an object map, plain
// and striped, open for writing (the map in memory), read-only (the map
// read from the cluster) and at a snapshot.
func TestAllocatedExtentsAgainstRbdDiff(t *testing.T) {
	ioc := testPool(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opts CreateOptions
	}{
		{"objectmap", CreateOptions{Order: 20}},
		{"plain", CreateOptions{Order: 20, Features: FeatureLayering}},
		{"striped-objectmap", CreateOptions{Order: 20, StripeUnit: 64 << 10, StripeCount: 3}},
		{"striped-plain", CreateOptions{Order: 20, Features: FeatureLayering, StripeUnit: 64 << 10, StripeCount: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := imageName(t)
			spec := cluster.Pool + "/" + name
			if err := Create(ctx, ioc, name, 10<<20+4096, c.opts); err != nil {
				t.Fatal(err)
			}
			img, err := Open(ctx, ioc, name, OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer img.Close()
			writePattern(t, img, 1<<20)
			info, err := img.Stat(ctx)
			if err != nil {
				t.Fatal(err)
			}
			l := striper.Layout{ObjectSize: info.ObjectSize, StripeUnit: info.StripeUnit, StripeCount: info.StripeCount}
			withMap := info.Features&FeatureObjectMap != 0
			var oracle []span
			if withMap {
				oracle = rbdDiff(t, spec, "--whole-object")
			} else {
				oracle = rbdDiff(t, spec)
			}
			got := allocated(t, img)
			if fmt.Sprint(got) != fmt.Sprint(oracle) {
				t.Fatalf("allocated %v\nrbd diff     %v", got, oracle)
			}
			// every object with data is listed; a listed object without
			// data is empty (a zeroed tail truncates it to nothing)
			objs := dataObjects(t, info.BlockNamePrefix)
			withData := objectsOf(l, got)
			for o := range withData {
				if !objs[o] {
					t.Errorf("object %d has data but rados ls does not list it", o)
				}
			}
			for o := range objs {
				if !withData[o] && objectSize(t, info.BlockNamePrefix, o) != 0 {
					t.Errorf("rados ls lists object %d with data, reported as a hole", o)
				}
			}
			t.Logf("%d extents over %d objects", len(got), len(objs))

			ro, err := Open(ctx, ioc, name, OpenOptions{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			if r := allocated(t, ro); fmt.Sprint(r) != fmt.Sprint(got) {
				t.Fatalf("read-only open: %v, writer: %v", r, got)
			}

			if err := img.CreateSnapshot(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			if _, err := img.WriteAtContext(ctx, make([]byte, 4096), 8<<20); err != nil {
				t.Fatal(err)
			}
			snap, err := Open(ctx, ioc, name, OpenOptions{Snapshot: "s"})
			if err != nil {
				t.Fatal(err)
			}
			defer snap.Close()
			if r := allocated(t, snap); fmt.Sprint(r) != fmt.Sprint(got) {
				t.Fatalf("snapshot: %v, head before the write: %v", r, got)
			}
			head := allocated(t, img)
			if withMap {
				oracle = rbdDiff(t, spec, "--whole-object")
			} else {
				oracle = rbdDiff(t, spec)
			}
			if fmt.Sprint(head) != fmt.Sprint(oracle) {
				t.Fatalf("after snapshot and write: allocated %v\nrbd diff %v", head, oracle)
			}
		})
	}
}

// TestAllocatedExtentsClone checks that a clone reports the parent
// overlap as allocated and its own objects beyond it.
func TestAllocatedExtentsClone(t *testing.T) {
	ioc := testPool(t)
	ctx := context.Background()
	parent := imageName(t)
	if err := Create(ctx, ioc, parent, 4<<20, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	p, err := Open(ctx, ioc, parent, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.WriteAtContext(ctx, []byte("parent"), 0); err != nil {
		t.Fatal(err)
	}
	if err := p.CreateSnapshot(ctx, "base"); err != nil {
		t.Fatal(err)
	}
	if err := p.ProtectSnapshot(ctx, "base"); err != nil {
		t.Fatal(err)
	}
	child := imageName(t)
	if err := Clone(ctx, ioc, parent, "base", ioc, child, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, ioc, child, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Resize(ctx, 8<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteAtContext(ctx, []byte("child"), 6<<20); err != nil {
		t.Fatal(err)
	}
	got := allocated(t, c)
	want := []span{{0, 4 << 20}, {6 << 20, 7 << 20}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("clone: allocated %v, want %v", got, want)
	}
}
