package guestbench

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAIOBytes writes and reads a file through the AIO context and
// checks the bytes with the os package, several requests in flight.
func TestAIOBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dev")
	if err := os.WriteFile(path, make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	f := mustOpen(t, path, os.O_RDWR)
	defer f.Close()
	a, err := newAIOCtx(4)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	bufs := make([][]byte, 4)
	cbs := make([]iocb, 4)
	for i := range bufs {
		bufs[i] = bytes.Repeat([]byte{'a' + byte(i)}, 4096)
		cbs[i].set(uint64(i), true, int(f.Fd()), bufs[i], int64(i)*8192)
		if err := a.submit(&cbs[i]); err != nil {
			t.Fatal(err)
		}
	}
	evs := make([]aioEvent, 4)
	seen := waitAll(t, a, evs, 4)
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range bufs {
		if !seen[uint64(i)] {
			t.Errorf("no completion for write %d", i)
		}
		if !bytes.Equal(onDisk[i*8192:i*8192+4096], bufs[i]) {
			t.Errorf("write %d is not in the file", i)
		}
	}
	for i := range bufs {
		clear(bufs[i])
		cbs[i].set(uint64(i), false, int(f.Fd()), bufs[i], int64(i)*8192)
		if err := a.submit(&cbs[i]); err != nil {
			t.Fatal(err)
		}
	}
	waitAll(t, a, evs, 4)
	for i := range bufs {
		if !bytes.Equal(bufs[i], onDisk[i*8192:i*8192+4096]) {
			t.Errorf("read %d = %q..., want %q...", i, bufs[i][:4], onDisk[i*8192:i*8192+4])
		}
	}
}

// waitAll waits for n completions that each moved 4096 bytes and
// returns which tags completed.
func waitAll(t *testing.T, a *aioCtx, evs []aioEvent, n int) map[uint64]bool {
	t.Helper()
	seen := map[uint64]bool{}
	for len(seen) < n {
		got, err := a.wait(evs, time.Second)
		if err != nil || got == 0 {
			t.Fatalf("wait = %d, %v", got, err)
		}
		for _, e := range evs[:got] {
			if e.res != 4096 || seen[e.data] {
				t.Fatalf("completion %+v (seen before: %v)", e, seen[e.data])
			}
			seen[e.data] = true
		}
	}
	return seen
}

// TestRunAIO runs a depth-8 write and read case on a file (on a
// filesystem with O_DIRECT, as the guest's block devices take it) and
// checks the figures, then a read past the file's end, which must fail
// naming the file and the shortfall.
func TestRunAIO(t *testing.T) {
	dir, err := os.MkdirTemp(".", "aio")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dev := filepath.Join(dir, "disk")
	const span = 4 << 20
	if err := os.WriteFile(dev, make([]byte, span), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []ioCase{
		{Name: "4k randwrite QD8", Write: true, Rand: true, BS: 4096, QD: 8},
		{Name: "4k randread QD8", Rand: true, BS: 4096, QD: 8},
		{Name: "64k seq read QD4", BS: 64 << 10, QD: 4},
	} {
		r, err := runIO(t.Context(), dev, span, c, 300*time.Millisecond, false)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if r.ops <= 0 || int64(len(r.lat)) != r.ops || r.bytes != r.ops*int64(c.BS) || r.seconds < 0.3 || r.seconds > 5 ||
			!slices.IsSorted(r.lat) || r.lat[0] <= 0 {
			t.Errorf("%s: ops %d, bytes %d, %.2f s, %d latencies", c.Name, r.ops, r.bytes, r.seconds, len(r.lat))
		}
	}
	onDisk, err := os.ReadFile(dev)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(onDisk, []byte{0}) == len(onDisk) {
		t.Error("the write case left the file all zeroes")
	}
	c := ioCase{Name: "4k randread QD8", Rand: true, BS: 4096, QD: 8}
	_, err = runIO(t.Context(), dev, 4*span, c, 300*time.Millisecond, false)
	if err == nil || !strings.Contains(err.Error(), "aio pread "+dev) || !strings.Contains(err.Error(), "0 of 4096 bytes") {
		t.Fatalf("reads past the end = %v, want a short read naming the file", err)
	}
}
