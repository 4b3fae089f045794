package nbd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"runtime"
	"sync"
	"testing"

	"github.com/purerbd/purerbd/nbd"
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
