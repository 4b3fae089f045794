package nbd_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/purerbd/purerbd/nbd"
)

// backendUnderTest is what both shipped backends offer.
type backendUnderTest interface {
	nbd.Backend
	nbd.Flusher
	nbd.Trimmer
	nbd.Zeroer
	nbd.BlockStatuser
	nbd.Resizer
	nbd.SizeNotifier
	nbd.MultiConnCoherent
}

func newFileBackend(t *testing.T, size int64) *nbd.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	f, err := nbd.OpenFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readBack(t *testing.T, b nbd.Backend, off int64, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	if _, err := b.ReadAt(context.Background(), p, off); err != nil {
		t.Fatalf("read %d+%d: %v", off, n, err)
	}
	return p
}

// extentsOf flattens BlockStatus over [off, off+n) into per-64K flags.
func allocation(t *testing.T, b nbd.BlockStatuser, off, n int64) []nbd.Extent {
	t.Helper()
	var out []nbd.Extent
	for pos := off; pos < off+n; {
		ex, err := b.BlockStatus(context.Background(), pos, off+n-pos)
		if err != nil || len(ex) == 0 {
			t.Fatalf("block status at %d: %v %v", pos, ex, err)
		}
		for _, e := range ex {
			if k := len(out); k > 0 && out[k-1].Flags == e.Flags {
				out[k-1].Length += e.Length
			} else {
				out = append(out, e)
			}
			pos += e.Length
		}
	}
	return out
}

func TestBackends(t *testing.T) {
	const size = 4 << 20
	for name, mk := range map[string]func(t *testing.T) backendUnderTest{
		"memory": func(t *testing.T) backendUnderTest { m, _ := nbd.NewMemory(size); return m },
		"file":   func(t *testing.T) backendUnderTest { return newFileBackend(t, size) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := mk(t)
			if !b.MultiConnCoherent() {
				t.Error("not coherent across connections")
			}
			if got := allocation(t, b, 0, size); len(got) != 1 || got[0].Flags != nbd.ExtentHole|nbd.ExtentZero {
				t.Fatalf("empty backend allocation: %+v", got)
			}
			data := bytes.Repeat([]byte{0x5a}, 256<<10)
			if _, err := b.WriteAt(ctx, data, 1<<20); err != nil {
				t.Fatal(err)
			}
			got := allocation(t, b, 0, size)
			want := []nbd.Extent{{Length: 1 << 20, Flags: 3}, {Length: 256 << 10}, {Length: size - 1<<20 - 256<<10, Flags: 3}}
			if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
				t.Fatalf("allocation after a write: %+v", got)
			}
			if err := b.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			// Trim the middle 128K: reads as zero, and becomes a hole.
			if err := b.Trim(ctx, 1<<20+64<<10, 128<<10); err != nil {
				t.Fatal(err)
			}
			p := readBack(t, b, 1<<20, 256<<10)
			if !bytes.Equal(p[:64<<10], data[:64<<10]) || !bytes.Equal(p[64<<10:192<<10], make([]byte, 128<<10)) || !bytes.Equal(p[192<<10:], data[:64<<10]) {
				t.Fatal("trimmed range does not read as zero around kept data")
			}
			if got := allocation(t, b, 1<<20+64<<10, 128<<10); len(got) != 1 || got[0].Flags&nbd.ExtentZero == 0 {
				t.Fatalf("trimmed range allocation %+v", got)
			}
			// Zero with and without NO_HOLE, unaligned.
			b.WriteAt(ctx, data, 2<<20)
			if err := b.Zero(ctx, 2<<20+100, 5000, nbd.ZeroNoHole); err != nil {
				t.Fatal(err)
			}
			if err := b.Zero(ctx, 2<<20+128<<10, 128<<10, nbd.ZeroFast); err != nil {
				t.Fatal(err)
			}
			p = readBack(t, b, 2<<20, 256<<10)
			w := bytes.Clone(data)
			clear(w[100:5100])
			clear(w[128<<10:])
			if !bytes.Equal(p, w) {
				t.Fatal("zeroed ranges read back wrong")
			}
			// Resize down and up: the cut part reads as zero.
			var sizes []int64
			cancel := b.NotifySize(func(s int64) { sizes = append(sizes, s) })
			if err := b.Resize(ctx, 1<<20+1000); err != nil {
				t.Fatal(err)
			}
			if b.Size() != 1<<20+1000 {
				t.Fatalf("size %d after resize", b.Size())
			}
			if err := b.Resize(ctx, size); err != nil {
				t.Fatal(err)
			}
			cancel()
			b.Resize(ctx, size+1)
			if len(sizes) != 2 || sizes[0] != 1<<20+1000 || sizes[1] != size {
				t.Fatalf("size notifications %v", sizes)
			}
			p = readBack(t, b, 1<<20, 64<<10)
			if !bytes.Equal(p[:1000], data[:1000]) || !bytes.Equal(p[1000:], make([]byte, 64<<10-1000)) {
				t.Fatal("data past a shrink survived a regrow")
			}
		})
	}
}

func TestMemoryBounds(t *testing.T) {
	m, _ := nbd.NewMemory(1000)
	ctx := context.Background()
	if _, err := m.WriteAt(ctx, make([]byte, 10), 995); !errors.Is(err, nbd.ErrInvalid) {
		t.Fatalf("write past the end: %v", err)
	}
	if _, err := m.ReadAt(ctx, make([]byte, 10), -1); !errors.Is(err, nbd.ErrInvalid) {
		t.Fatalf("read at -1: %v", err)
	}
	if _, err := nbd.NewMemory(-1); err == nil {
		t.Fatal("negative size accepted")
	}
	if nbd.ErrnoOf(context.Canceled) != nbd.ErrShutdown || nbd.ErrnoOf(errors.New("x")) != nbd.ErrIO || nbd.ErrnoOf(nbd.ErrFastZeroUnsupported) != nbd.ErrNotSup {
		t.Fatal("ErrnoOf mapping")
	}
}

func TestFileReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ro.img")
	os.WriteFile(path, []byte("read only data"), 0o600)
	f, err := nbd.OpenFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.ReadOnly() || f.Size() != 14 {
		t.Fatalf("read-only %v size %d", f.ReadOnly(), f.Size())
	}
	if _, err := f.WriteAt(context.Background(), []byte("x"), 0); !errors.Is(err, nbd.ErrPerm) {
		t.Fatalf("write: %v", err)
	}
	if err := f.Trim(context.Background(), 0, 1); !errors.Is(err, nbd.ErrPerm) {
		t.Fatalf("trim: %v", err)
	}
}

func TestListenUnixMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := nbd.ListenUnix(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket mode %v", fi.Mode())
	}
	l.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket left after Close: %v", err)
	}
	// A regular file in the way is not replaced.
	os.WriteFile(path, nil, 0o600)
	if _, err := nbd.ListenUnix(path, 0); err == nil {
		t.Fatal("ListenUnix replaced a regular file")
	}
	tl, err := nbd.ListenTCP(":0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	if host := tl.Addr().String(); host[:10] != "127.0.0.1:" {
		t.Fatalf("TCP default address %s is not loopback", host)
	}
}
