package chaostest

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// memTarget is an in-memory image for testing the workload's own
// bookkeeping; it can be told to lose or damage writes.
type memTarget struct {
	mu       sync.Mutex
	data     []byte
	loseNext bool // acknowledge the next write without doing it
	failNext bool // do the next write but report an error
}

func (m *memTarget) readAt(_ context.Context, p []byte, off int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	copy(p, m.data[off:])
	return nil
}

func (m *memTarget) writeAt(_ context.Context, p []byte, off int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.loseNext {
		m.loseNext = false
		return nil
	}
	copy(m.data[off:], p)
	if m.failNext {
		m.failNext = false
		return context.DeadlineExceeded
	}
	return nil
}

func (m *memTarget) zero(_ context.Context, off, n int64, _ int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.data[off : off+n])
	if m.failNext {
		m.failNext = false
		return context.DeadlineExceeded
	}
	return nil
}

func (m *memTarget) flush(context.Context) error { return nil }

func newMemPath(blocks int) (*path, *memTarget) {
	t := &memTarget{data: make([]byte, blocks*BlockSize)}
	return &path{name: "mem", image: "mem", model: newModel("mem", 7, int64(blocks)*BlockSize), target: t,
		log: slog.New(slog.DiscardHandler), hang: time.Minute}, t
}

func TestBlockRoundTrip(t *testing.T) {
	b := make([]byte, BlockSize)
	fillBlock(b, 1, 2, 3*BlockSize, 9)
	if got := decodeBlock(b, 1, 2, 3*BlockSize); got.bad != "" || got.version != 9 || got.zero {
		t.Fatalf("decode: %+v", got)
	}
	for _, tc := range []struct {
		name string
		mod  func([]byte)
		seed uint64
		tag  uint64
		off  uint64
		want string
	}{
		{"flipped payload bit", func(b []byte) { b[100] ^= 1 }, 1, 2, 3 * BlockSize, "crc"},
		{"other image", nil, 1, 5, 3 * BlockSize, "another image"},
		{"misplaced", nil, 1, 2, 4 * BlockSize, "misplaced"},
		{"other seed", nil, 8, 2, 3 * BlockSize, "payload"},
		{"torn", func(b []byte) { clear(b[2048:]) }, 1, 2, 3 * BlockSize, "crc"},
	} {
		c := append([]byte(nil), b...)
		if tc.mod != nil {
			tc.mod(c)
		}
		got := decodeBlock(c, tc.seed, tc.tag, tc.off)
		if !strings.Contains(got.bad, tc.want) {
			t.Errorf("%s: got %+v, want an error with %q", tc.name, got, tc.want)
		}
	}
}

// TestWorkloadClean runs the workload on a faithful in-memory image:
// nothing lost, nothing corrupt.
func TestWorkloadClean(t *testing.T) {
	p, _ := newMemPath(512)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		rng := rand.New(rand.NewPCG(1, uint64(w)))
		wg.Go(func() { p.worker(ctx, rng, stop) })
	}
	wg.Go(func() { p.scrubber(ctx, stop) })
	// at least 300 ms and 100 acknowledged ops: how long that takes
	// depends on the machine's load (under -race on a busy machine a
	// fixed 300 ms saw 99), so the bound is work done, not time
	start := time.Now()
	for time.Since(start) < 300*time.Millisecond || (p.acked.Load() < 100 && time.Since(start) < time.Minute) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if err := p.verifyAll(ctx); err != nil {
		t.Fatal(err)
	}
	lost, corrupt := p.model.findings()
	if len(lost)+len(corrupt) > 0 || p.failed.Load() > 0 {
		t.Fatalf("lost %v, corrupt %v, %d failed", firstN(lost, 3), firstN(corrupt, 3), p.failed.Load())
	}
	if p.acked.Load() < 100 || p.verified.Load() < 512 {
		t.Fatalf("only %d ops acked, %d blocks verified", p.acked.Load(), p.verified.Load())
	}
}

// TestWorkloadFindsLoss checks that the model notices an acknowledged
// write that never landed, a damaged block, and that it accepts both
// outcomes of a failed write.
func TestWorkloadFindsLoss(t *testing.T) {
	ctx := context.Background()
	p, mem := newMemPath(16)
	for i := range 16 {
		p.write(ctx, i, 1, false, 0)
	}
	mem.loseNext = true
	p.write(ctx, 3, 1, false, 0) // acknowledged, lost
	mem.failNext = true
	p.write(ctx, 5, 1, false, 0) // failed, but landed: fine
	mem.failNext = true
	p.write(ctx, 6, 2, true, 0) // a failed discard that landed: fine
	mem.data[9*BlockSize+77] ^= 0x40
	p.write(ctx, 12, 1, true, 1)                                       // acknowledged discard
	copy(mem.data[12*BlockSize:], mem.data[11*BlockSize:12*BlockSize]) // stale data where zeroes belong
	if err := p.verifyAll(ctx); err != nil {
		t.Fatal(err)
	}
	lost, corrupt := p.model.findings()
	if len(lost) != 1 || !strings.Contains(lost[0], "block 3 ") || !strings.Contains(lost[0], "older version 1") {
		t.Errorf("lost: %q", lost)
	}
	if len(corrupt) != 2 || !strings.Contains(corrupt[0], "block 9 ") || !strings.Contains(corrupt[1], "block 12 ") {
		t.Errorf("corrupt: %q", corrupt)
	}
	if p.failed.Load() != 2 {
		t.Errorf("%d failed, want 2", p.failed.Load())
	}
}
