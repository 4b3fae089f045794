package rbdnbd_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
	"github.com/purerbd/purerbd/nbd/rbdnbd"
)

// objectDisk stands in for an RBD image in memory: 64 KiB "objects" of
// which a set exist; a missing object is a hole. Tests with a real image
// are cmd/purerbd's (purerbd nbd serve, against librbd's rbd diff and
// export) and the CSI node's in the VM.
type objectDisk struct {
	mu       sync.Mutex
	data     []byte
	exists   map[int64]bool
	readOnly bool
	// gap makes AllocatedExtents skip a byte, as a broken image would
	gap      bool
	zeroes   atomic.Int64 // WriteZeroes calls
	reports  atomic.Int64 // AllocatedExtents calls
	discards atomic.Int64
	flushes  atomic.Int64
	notified func(int64)
}

const object = 64 << 10

func newObjectDisk(objects int) *objectDisk {
	return &objectDisk{data: make([]byte, objects*object), exists: map[int64]bool{}}
}

func (d *objectDisk) Size() int64    { return int64(len(d.data)) }
func (d *objectDisk) ReadOnly() bool { return d.readOnly }

func (d *objectDisk) ReadAtContext(_ context.Context, p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return copy(p, d.data[off:]), nil
}

func (d *objectDisk) WriteAtContext(_ context.Context, p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for o := off / object; o <= (off+int64(len(p))-1)/object; o++ {
		d.exists[o] = true
	}
	return copy(d.data[off:], p), nil
}

func (d *objectDisk) Flush(context.Context) error { d.flushes.Add(1); return nil }

// punch zeroes the range and removes the objects it covers whole.
func (d *objectDisk) punch(off, length int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.data[off : off+length])
	for o := (off + object - 1) / object; (o+1)*object <= off+length; o++ {
		delete(d.exists, o)
	}
}

func (d *objectDisk) Discard(_ context.Context, off, length int64) error {
	d.discards.Add(1)
	d.punch(off, length)
	return nil
}

func (d *objectDisk) WriteZeroes(_ context.Context, off, length int64) error {
	d.zeroes.Add(1)
	d.punch(off, length)
	return nil
}

// AllocatedExtents reports one extent per object, stopping after four.
func (d *objectDisk) AllocatedExtents(_ context.Context, off, length int64, fn func(off, length int64, allocated bool) error) error {
	d.reports.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gap {
		return fn(off+1, length-1, true)
	}
	end := min(off+length, int64(len(d.data)))
	for i := 0; off < end && i < 4; i++ {
		n := min(end, (off/object+1)*object) - off
		if err := fn(off, n, d.exists[off/object]); err != nil {
			return err
		}
		off += n
	}
	return nil
}

func (d *objectDisk) NotifySize(fn func(int64)) (cancel func()) {
	d.notified = fn
	return func() { d.notified = nil }
}

func serve(t *testing.T, d *objectDisk, o nbdtest.Options) *nbdtest.Client {
	t.Helper()
	srv := nbdtest.Start(t, nbd.Config{Exports: []*nbd.Export{{Name: "img", Backend: rbdnbd.New(d)}}})
	o.Export = "img"
	c, err := nbdtest.Dial(context.Background(), "unix", srv.Socket, o)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestFlags: an image is offered with every ability, to the kernel (whose
// flags are nbd.Export.TransmissionFlags) as to a userspace client; read
// only when the image is.
func TestFlags(t *testing.T) {
	const all = nbdtest.TFlagHasFlags | nbdtest.TFlagSendFlush | nbdtest.TFlagSendFUA | nbdtest.TFlagSendTrim |
		nbdtest.TFlagSendZeroes | nbdtest.TFlagSendFastZero | nbdtest.TFlagMultiConn | nbdtest.TFlagSendCache
	const ro = nbdtest.TFlagHasFlags | nbdtest.TFlagReadOnly | nbdtest.TFlagSendFlush | nbdtest.TFlagMultiConn | nbdtest.TFlagSendCache
	for _, tc := range []struct {
		readOnly bool
		want     uint16
	}{{false, all}, {true, ro}} {
		d := newObjectDisk(4)
		d.readOnly = tc.readOnly
		e := nbd.Export{Backend: rbdnbd.New(d)}
		f, err := e.TransmissionFlags()
		if err != nil || f != tc.want {
			t.Errorf("read-only %v: transmission flags %#x, %v; want %#x", tc.readOnly, f, err, tc.want)
		}
		c := serve(t, d, nbdtest.Options{Structured: true})
		if c.Flags != tc.want|nbdtest.TFlagSendDF {
			t.Errorf("read-only %v: a structured client got flags %#x, want %#x", tc.readOnly, c.Flags, tc.want|nbdtest.TFlagSendDF)
		}
	}
}

// TestZeroesAndBlockStatus: WRITE_ZEROES deallocates through WriteZeroes
// (fast ones too), NO_HOLE writes zeroes and keeps the objects, NO_HOLE
// with FAST is refused; block status reports holes from
// AllocatedExtents, which structured reads do not consult.
func TestZeroesAndBlockStatus(t *testing.T) {
	d := newObjectDisk(16)
	c := serve(t, d, nbdtest.Options{BlockStatus: true})
	ctx := context.Background()
	if err := c.WriteAt(ctx, bytes.Repeat([]byte{7}, 3*object), object, 0); err != nil {
		t.Fatal(err)
	}
	hole := uint32(nbd.ExtentHole | nbd.ExtentZero)
	x := func(objects int, flags uint32) nbdtest.Extent {
		return nbdtest.Extent{Length: uint32(objects * object), Flags: flags}
	}
	status := func(want ...nbdtest.Extent) {
		t.Helper()
		ext, err := c.BlockStatus(ctx, 0, 16*object, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ext) != len(want) {
			t.Fatalf("block status %v, want %v", ext, want)
		}
		for i := range ext {
			if ext[i] != want[i] {
				t.Fatalf("block status %v, want %v", ext, want)
			}
		}
	}
	status(x(1, hole), x(3, 0), x(12, hole))

	before := d.reports.Load()
	p := make([]byte, 2*object)
	r, err := c.Do(ctx, nbdtest.Cmd{Type: nbdtest.CmdRead, Offset: 0, Length: uint32(len(p)), Buf: p})
	if err != nil || r.Holes != 0 || d.reports.Load() != before {
		t.Fatalf("read: %v, %d holes, %d allocation calls", err, r.Holes, d.reports.Load()-before)
	}
	if p[0] != 0 || p[object] != 7 {
		t.Fatal("read returned wrong bytes")
	}

	if _, err := c.Do(ctx, nbdtest.Cmd{Type: nbdtest.CmdWriteZeroes, Flags: nbdtest.CmdFlagFastZero,
		Offset: 2 * object, Length: object}); err != nil {
		t.Fatal(err)
	}
	if d.zeroes.Load() != 1 || d.exists[2] {
		t.Fatalf("fast zero: %d WriteZeroes calls, object 2 exists %v", d.zeroes.Load(), d.exists[2])
	}
	if _, err := c.Do(ctx, nbdtest.Cmd{Type: nbdtest.CmdWriteZeroes, Flags: nbdtest.CmdFlagNoHole,
		Offset: 3 * object, Length: object}); err != nil {
		t.Fatal(err)
	}
	if d.zeroes.Load() != 1 || !d.exists[3] || d.data[3*object] != 0 || d.data[4*object-1] != 0 {
		t.Fatalf("no-hole zero: %d WriteZeroes calls, object 3 exists %v", d.zeroes.Load(), d.exists[3])
	}
	_, err = c.Do(ctx, nbdtest.Cmd{Type: nbdtest.CmdWriteZeroes, Flags: nbdtest.CmdFlagNoHole | nbdtest.CmdFlagFastZero,
		Offset: object, Length: object})
	var re *nbdtest.ReplyError
	if !errors.As(err, &re) || re.Errno != nbdtest.ENOTSUP || d.data[object] != 7 {
		t.Fatalf("fast no-hole zero: %v, want ENOTSUP and nothing changed", err)
	}
	status(x(1, hole), x(1, 0), x(1, hole), x(1, 0), x(12, hole))

	if _, err := c.Do(ctx, nbdtest.Cmd{Type: nbdtest.CmdTrim, Offset: object, Length: object}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if d.discards.Load() != 1 || d.exists[1] || d.flushes.Load() != 1 {
		t.Fatalf("trim and flush: %d Discard calls (object 1 exists %v), %d Flush calls", d.discards.Load(), d.exists[1], d.flushes.Load())
	}
}

// TestZeroNoHoleLarge: a NO_HOLE zero larger than one buffer writes every
// byte of it.
func TestZeroNoHoleLarge(t *testing.T) {
	d := newObjectDisk(48) // 3 MiB
	for i := range d.data {
		d.data[i] = 0xff
	}
	b := rbdnbd.New(d)
	const off, n = 12345, 5<<19 + 77
	if err := b.Zero(context.Background(), off, n, nbd.ZeroNoHole); err != nil {
		t.Fatal(err)
	}
	for i, c := range d.data {
		if want := byte(0xff); i >= off && i < off+n {
			want = 0
			if c != want {
				t.Fatalf("byte %d is %#x after zeroing", i, c)
			}
		} else if c != want {
			t.Fatalf("byte %d outside the range is %#x", i, c)
		}
	}
}

// TestAllocationGap: allocation that skips bytes fails the request.
func TestAllocationGap(t *testing.T) {
	d := newObjectDisk(1)
	d.gap = true
	c := serve(t, d, nbdtest.Options{BlockStatus: true})
	if _, err := c.BlockStatus(context.Background(), 0, 4096, 0); err == nil {
		t.Fatal("block status with a gap in the reported allocation succeeded")
	}
}

// TestNotifySize: size notifications reach the Backend's subscribers (the
// kernel attach follows a resize made elsewhere through them).
func TestNotifySize(t *testing.T) {
	d := newObjectDisk(1)
	var got int64
	cancel := rbdnbd.New(d).NotifySize(func(s int64) { got = s })
	d.notified(1 << 20)
	cancel()
	if got != 1<<20 || d.notified != nil {
		t.Fatalf("notified %d, cancelled %v", got, d.notified == nil)
	}
}
