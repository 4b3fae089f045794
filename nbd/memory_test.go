package nbd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// Memory keeps its data in 64 MiB segments; these tests cross a segment
// boundary and check what the allocation, trims and resizes leave.
const memSeg = 64 << 20

func TestMemoryAcrossSegments(t *testing.T) {
	ctx := context.Background()
	m, err := nbd.NewMemory(memSeg + 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 192<<10)
	rand.Read(data)
	off := int64(memSeg - 100<<10) // 100 KiB before the boundary: 4 chunks touched
	if _, err := m.WriteAt(ctx, data, off); err != nil {
		t.Fatal(err)
	}
	if got := m.AllocatedBytes(); got != 4*64<<10 {
		t.Fatalf("allocated %d after a 192 KiB write over 4 chunks", got)
	}
	if p := readBack(t, m, off, len(data)); !bytes.Equal(p, data) {
		t.Fatal("data across the segment boundary differs")
	}
	ext, err := m.BlockStatus(ctx, memSeg-192<<10, 512<<10)
	if err != nil {
		t.Fatal(err)
	}
	want := []nbd.Extent{{Length: 64 << 10, Flags: nbd.ExtentHole | nbd.ExtentZero}, {Length: 256 << 10}, {Length: 192 << 10, Flags: nbd.ExtentHole | nbd.ExtentZero}}
	if len(ext) != len(want) {
		t.Fatalf("extents %v, want %v", ext, want)
	}
	for i := range want {
		if ext[i] != want[i] {
			t.Fatalf("extents %v, want %v", ext, want)
		}
	}

	// A trim of the whole range frees the two whole chunks and zeroes the
	// partial ends, which stay allocated.
	if err := m.Trim(ctx, off, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if got := m.AllocatedBytes(); got != 2*64<<10 {
		t.Fatalf("allocated %d after the trim, want the 2 partial chunks", got)
	}
	if p := readBack(t, m, off-64<<10, len(data)+128<<10); !bytes.Equal(p, make([]byte, len(p))) {
		t.Fatal("trimmed range does not read as zeroes")
	}
	// A freed chunk written again holds the new data only.
	rand.Read(data[:4096])
	if _, err := m.WriteAt(ctx, data[:4096], memSeg); err != nil {
		t.Fatal(err)
	}
	p := readBack(t, m, memSeg, 64<<10)
	if !bytes.Equal(p[:4096], data[:4096]) || !bytes.Equal(p[4096:], make([]byte, len(p)-4096)) {
		t.Fatal("rewritten chunk holds stale bytes")
	}

	// ZeroNoHole zeroes in place and allocates: of its two chunks, the
	// first is the partial end of the trim, allocated already.
	if err := m.Zero(ctx, memSeg+64<<10, 128<<10, nbd.ZeroNoHole); err != nil {
		t.Fatal(err)
	}
	if got := m.AllocatedBytes(); got != 4*64<<10 {
		t.Fatalf("allocated %d after a no-hole zero of 2 chunks, want 4 chunks", got)
	}
	if p := readBack(t, m, memSeg+64<<10, 128<<10); !bytes.Equal(p, make([]byte, len(p))) {
		t.Fatal("no-hole zeroed range does not read as zeroes")
	}
}

func TestMemoryShrinkAndGrowPastSegments(t *testing.T) {
	ctx := context.Background()
	m, _ := nbd.NewMemory(1 << 20)
	if err := m.Resize(ctx, 3*memSeg); err != nil { // grows the segment table
		t.Fatal(err)
	}
	data := make([]byte, 64<<10)
	rand.Read(data)
	for _, off := range []int64{0, 2*memSeg + 4096, 3*memSeg - 64<<10} {
		if _, err := m.WriteAt(ctx, data, off); err != nil {
			t.Fatalf("write at %d: %v", off, err)
		}
	}
	if err := m.Resize(ctx, memSeg+1000); err != nil {
		t.Fatal(err)
	}
	if got := m.AllocatedBytes(); got != 64<<10 {
		t.Fatalf("allocated %d after the shrink, want only the first chunk", got)
	}
	if err := m.Resize(ctx, 3*memSeg); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{2*memSeg + 4096, 3*memSeg - 64<<10} {
		if p := readBack(t, m, off, len(data)); !bytes.Equal(p, make([]byte, len(p))) {
			t.Fatalf("data at %d, past a shrink, survived a regrow", off)
		}
	}
	ext, err := m.BlockStatus(ctx, memSeg, 2*memSeg)
	if err != nil || len(ext) != 1 || ext[0].Flags != nbd.ExtentHole|nbd.ExtentZero || ext[0].Length != 2*memSeg {
		t.Fatalf("past the shrink after a regrow: extents %v, %v; want one hole", ext, err)
	}
	if p := readBack(t, m, 0, len(data)); !bytes.Equal(p, data) {
		t.Fatal("data before the new end was lost")
	}
}

// TestMemoryConcurrentChunks hammers neighbouring chunks from many
// goroutines (run with -race): writes, reads, trims and block status on
// the same chunks must neither race nor lose the writes of others.
func TestMemoryConcurrentChunks(t *testing.T) {
	ctx := context.Background()
	m, _ := nbd.NewMemory(2 * memSeg)
	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker owns 4 KiB in every one of 8 chunks that
			// straddle the segment boundary.
			p := bytes.Repeat([]byte{byte(w + 1)}, 4096)
			for i := range 200 {
				off := int64(memSeg-4*64<<10) + int64(i%8)*64<<10 + int64(w)*4096
				if _, err := m.WriteAt(ctx, p, off); err != nil {
					t.Error(err)
					return
				}
				q := make([]byte, 4096)
				if _, err := m.ReadAt(ctx, q, off); err != nil || !bytes.Equal(p, q) {
					t.Errorf("worker %d read back %v, %v", w, q[:4], err)
					return
				}
				if _, err := m.BlockStatus(ctx, off, 4096); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 49 {
					runtime.GC() // unreachable segments only are unmapped
				}
			}
		}()
	}
	wg.Wait()
	if got := m.AllocatedBytes(); got != 8*64<<10 {
		t.Fatalf("allocated %d, want 8 chunks", got)
	}
}

// TestMemoryReadsOverTheWire reads ranges made of holes and data, across a
// segment boundary, small (answered from the chunks) and large (through a
// payload buffer), with structured replies (holes as hole chunks, or one
// data chunk with NBD_CMD_FLAG_DF) and simple ones, many in flight at
// once; small writes (from the read buffer) and large ones go in between.
func TestMemoryReadsOverTheWire(t *testing.T) {
	ctx := context.Background()
	srv, m := nbdtest.StartMemory(t, "", memSeg+1<<20)
	const chunk = 64 << 10
	// Data in [memSeg-128K, memSeg+64K) and [memSeg+128K, memSeg+192K).
	want := make([]byte, memSeg+1<<20)
	for _, r := range [][2]int{{memSeg - 2*chunk, memSeg + chunk}, {memSeg + 2*chunk, memSeg + 3*chunk}} {
		rand.Read(want[r[0]:r[1]])
		if _, err := m.WriteAt(ctx, want[r[0]:r[1]], int64(r[0])); err != nil {
			t.Fatal(err)
		}
	}
	type rd struct {
		off, n        int
		chunks, holes int // of a structured reply without DF: data runs may come in more chunks
	}
	reads := []rd{
		{memSeg - 3*chunk, 7 * chunk, 5, 3}, // hole, data (across the segment boundary), hole, data, hole
		{memSeg - 3*chunk, chunk, 1, 1},     // one hole
		{memSeg - 2*chunk + 100, 4096, 1, 0},
		{memSeg - 4096, 8192, 1, 0}, // data on both sides of the segment boundary
		{memSeg + chunk - 4096, 8192, 2, 1},
		{memSeg + 3*chunk, 4096, 1, 1},
		{memSeg + chunk - 8192, 12 << 10, 2, 1},
	}
	check := func(c *nbdtest.Client, structured bool) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 3*len(reads))
		for round := 0; round < 3; round++ {
			for _, r := range reads {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, df := range []bool{false, true} {
						p := make([]byte, r.n)
						for i := range p {
							p[i] = 0xaa
						}
						cmd := nbdtest.Cmd{Type: nbdtest.CmdRead, Offset: uint64(r.off), Length: uint32(r.n), Buf: p}
						if df && structured {
							cmd.Flags = nbdtest.CmdFlagDF
						}
						rep, err := c.Do(ctx, cmd)
						switch {
						case err != nil:
							errs <- fmt.Errorf("read %d+%d: %w", r.off, r.n, err)
						case !bytes.Equal(p, want[r.off:r.off+r.n]):
							errs <- fmt.Errorf("read %d+%d (df %v): wrong bytes", r.off, r.n, df)
						case !structured && !rep.Simple:
							errs <- fmt.Errorf("read %d+%d: no simple reply", r.off, r.n)
						case structured && df && (rep.Chunks != 1 || rep.Holes != 0):
							errs <- fmt.Errorf("read %d+%d with DF: %d chunks, %d holes; want one data chunk", r.off, r.n, rep.Chunks, rep.Holes)
						case structured && !df && (rep.Chunks < r.chunks || rep.Holes != r.holes):
							errs <- fmt.Errorf("read %d+%d: %d chunks, %d holes; want %d or more, %d", r.off, r.n, rep.Chunks, rep.Holes, r.chunks, r.holes)
						}
					}
				}()
			}
		}
		// Writes in flight meanwhile, outside the ranges read: small ones
		// and one over the read buffer.
		for _, n := range []int{4096, 100, 3 * chunk} {
			p := make([]byte, n)
			rand.Read(p)
			off := memSeg + 8*chunk
			if err := c.WriteAt(ctx, p, int64(off), 0); err != nil {
				t.Fatal(err)
			}
			copy(want[off:], p)
			q := make([]byte, n)
			if err := c.ReadAt(ctx, q, int64(off)); err != nil || !bytes.Equal(q, p) {
				t.Fatalf("read back a %d-byte write: %v", n, err)
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	for _, structured := range []bool{true, false} {
		c, err := nbdtest.Dial(ctx, "unix", srv.Socket, nbdtest.Options{Structured: structured})
		if err != nil {
			t.Fatal(err)
		}
		check(c, structured)
		c.Close()
	}
}
