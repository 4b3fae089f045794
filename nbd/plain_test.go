package nbd_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// plainDisk has only methods in standard types, like *rbd.Image: a disk
// of 64 KiB "objects" of which a set exist; a missing object is a hole.
type plainDisk struct {
	mu      sync.Mutex
	data    []byte
	exists  map[int64]bool
	zeroes  atomic.Int64 // WriteZeroes calls
	reports atomic.Int64 // AllocatedExtents calls
}

const plainObject = 64 << 10

func (d *plainDisk) Size() int64 { return int64(len(d.data)) }

func (d *plainDisk) ReadAtContext(_ context.Context, p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return copy(p, d.data[off:]), nil
}

func (d *plainDisk) WriteAtContext(_ context.Context, p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for o := off / plainObject; o <= (off+int64(len(p))-1)/plainObject; o++ {
		d.exists[o] = true
	}
	return copy(d.data[off:], p), nil
}

// WriteZeroes deallocates whole objects and zeroes the rest.
func (d *plainDisk) WriteZeroes(_ context.Context, off, length int64) error {
	d.zeroes.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.data[off : off+length])
	for o := (off + plainObject - 1) / plainObject; (o+1)*plainObject <= off+length; o++ {
		delete(d.exists, o)
	}
	return nil
}

// AllocatedExtents reports one extent per object, stopping after four.
func (d *plainDisk) AllocatedExtents(_ context.Context, off, length int64, fn func(off, length int64, allocated bool) error) error {
	d.reports.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	end := min(off+length, int64(len(d.data)))
	for i := 0; off < end && i < 4; i++ {
		n := min(end, (off/plainObject+1)*plainObject) - off
		if err := fn(off, n, d.exists[off/plainObject]); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// TestPlainTypedAbilities checks that Adapt finds WriteZeroes and
// AllocatedExtents, methods in standard types only, and that the server
// honours NO_HOLE and FAST_ZERO around them and keeps AllocatedExtents
// out of structured reads.
func TestPlainTypedAbilities(t *testing.T) {
	d := &plainDisk{data: make([]byte, 16*plainObject), exists: map[int64]bool{}}
	b, err := nbd.Adapt(d)
	if err != nil {
		t.Fatal(err)
	}
	srv := nbdtest.Start(t, nbd.Config{Exports: []*nbd.Export{{Name: "p", Backend: b}}})
	c := dial(t, srv, nbdtest.Options{Export: "p", BlockStatus: true})
	ctx := context.Background()
	if c.Flags&nbdtest.TFlagSendZeroes == 0 {
		t.Fatalf("flags %#x: no WRITE_ZEROES", c.Flags)
	}
	if err := c.WriteAt(ctx, bytes.Repeat([]byte{7}, 3*plainObject), plainObject, 0); err != nil {
		t.Fatal(err)
	}
	// objects 1..3 exist: data, then holes
	ext, err := c.BlockStatus(ctx, 0, 16*plainObject, 0)
	if err != nil {
		t.Fatal(err)
	}
	hole := uint32(nbd.ExtentHole | nbd.ExtentZero)
	x := func(objects int, flags uint32) nbdtest.Extent {
		return nbdtest.Extent{Length: uint32(objects * plainObject), Flags: flags}
	}
	want := []nbdtest.Extent{x(1, hole), x(3, 0), x(12, hole)}
	if !equalExtents(ext, want) {
		t.Fatalf("block status %v, want %v", ext, want)
	}
	// a structured read does not consult AllocatedExtents
	before := d.reports.Load()
	p := make([]byte, 2*plainObject)
	r, err := c.Do(ctx, nbdtest.Cmd{Type: nbdtest.CmdRead, Offset: 0, Length: uint32(len(p)), Buf: p})
	if err != nil || r.Holes != 0 || d.reports.Load() != before {
		t.Fatalf("read: %v, %d holes, %d status calls", err, r.Holes, d.reports.Load()-before)
	}
	if p[0] != 0 || p[plainObject] != 7 {
		t.Fatal("read returned wrong bytes")
	}

	// WRITE_ZEROES (fast too) goes to WriteZeroes and makes a hole
	if _, err := c.Do(ctx, nbdtest.Cmd{Type: nbdtest.CmdWriteZeroes, Flags: nbdtest.CmdFlagFastZero,
		Offset: 2 * plainObject, Length: plainObject}); err != nil {
		t.Fatal(err)
	}
	if d.zeroes.Load() != 1 || d.exists[2] {
		t.Fatalf("fast zero: %d WriteZeroes calls, object 2 exists %v", d.zeroes.Load(), d.exists[2])
	}
	// with NO_HOLE the server writes zeroes itself: the object stays
	if _, err := c.Do(ctx, nbdtest.Cmd{Type: nbdtest.CmdWriteZeroes, Flags: nbdtest.CmdFlagNoHole,
		Offset: 3 * plainObject, Length: plainObject}); err != nil {
		t.Fatal(err)
	}
	if d.zeroes.Load() != 1 || !d.exists[3] {
		t.Fatalf("no-hole zero: %d WriteZeroes calls, object 3 exists %v", d.zeroes.Load(), d.exists[3])
	}
	// NO_HOLE and FAST together cannot be done quickly
	_, err = c.Do(ctx, nbdtest.Cmd{Type: nbdtest.CmdWriteZeroes, Flags: nbdtest.CmdFlagNoHole | nbdtest.CmdFlagFastZero,
		Offset: 3 * plainObject, Length: plainObject})
	var re *nbdtest.ReplyError
	if !errors.As(err, &re) || re.Errno != nbdtest.ENOTSUP {
		t.Fatalf("fast no-hole zero: %v, want ENOTSUP", err)
	}
	ext, err = c.BlockStatus(ctx, 0, 16*plainObject, 0)
	if err != nil {
		t.Fatal(err)
	}
	want = []nbdtest.Extent{x(1, hole), x(1, 0), x(1, hole), x(1, 0), x(12, hole)}
	if !equalExtents(ext, want) {
		t.Fatalf("block status %v, want %v", ext, want)
	}
}

// badReporter reports an extent that does not start where it should.
type badReporter struct{ readerOnly }

func (badReporter) AllocatedExtents(_ context.Context, off, length int64, fn func(off, length int64, allocated bool) error) error {
	return fn(off+1, length-1, true)
}

func TestAllocationReporterGap(t *testing.T) {
	b, err := nbd.Adapt(badReporter{readerOnly{data: make([]byte, 4096)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := nbdtest.Start(t, nbd.Config{Exports: []*nbd.Export{{Name: "g", Backend: b}}})
	c := dial(t, srv, nbdtest.Options{Export: "g", BlockStatus: true})
	if _, err := c.BlockStatus(context.Background(), 0, 4096, 0); err == nil {
		t.Fatal("block status with a gap in the reported extents succeeded")
	}
}

func equalExtents(a, b []nbdtest.Extent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// resizable has the size methods *rbd.Image has.
type resizable struct {
	readerOnly
	resized int64
}

func (r *resizable) Resize(_ context.Context, size int64) error { r.resized = size; return nil }
func (r *resizable) NotifySize(fn func(int64)) func()           { fn(-1); return func() {} }

// TestAdaptKeepsSizeAbilities checks that Adapt's Backend is a Resizer
// and SizeNotifier exactly when the adapted value is (the kernel attach
// looks for them on the Backend).
func TestAdaptKeepsSizeAbilities(t *testing.T) {
	r := &resizable{readerOnly: readerOnly{data: make([]byte, 512)}}
	b, err := nbd.Adapt(r)
	if err != nil {
		t.Fatal(err)
	}
	rz, ok := b.(nbd.Resizer)
	if !ok {
		t.Fatal("adapted backend lost Resize")
	}
	if err := rz.Resize(context.Background(), 4096); err != nil || r.resized != 4096 {
		t.Fatalf("Resize: %v, inner saw %d", err, r.resized)
	}
	sn, ok := b.(nbd.SizeNotifier)
	if !ok {
		t.Fatal("adapted backend lost NotifySize")
	}
	var got int64
	sn.NotifySize(func(s int64) { got = s })()
	if got != -1 {
		t.Fatal("NotifySize not forwarded")
	}
	plain, err := nbd.Adapt(readerOnly{data: make([]byte, 512)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.(nbd.Resizer); ok {
		t.Error("a value without Resize became a Resizer")
	}
	if _, ok := plain.(nbd.SizeNotifier); ok {
		t.Error("a value without NotifySize became a SizeNotifier")
	}
	// the abilities of the inner value are still found for serving
	srv := nbdtest.Start(t, nbd.Config{Exports: []*nbd.Export{{Name: "r", Backend: b}}})
	c := dial(t, srv, nbdtest.Options{Export: "r"})
	if c.Flags&nbdtest.TFlagReadOnly == 0 {
		t.Fatalf("flags %#x: a value without a write method is served read-write", c.Flags)
	}
}
