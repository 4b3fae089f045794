package rados

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/crc32c"
)

// TestOperationSnapshots gives compound operations their own snapshot
// (reads) and snapshot context (writes), overriding the IOContext's, as
// package rbd does for every data object, and rolls an object back.
func TestOperationSnapshots(t *testing.T) {
	conn := connectTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// self-managed snapshots need a pool without pool snapshots
	if err := conn.CreatePool(ctx, "opsnap-pool"); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.DeletePool(context.Background(), "opsnap-pool") }()
	io, err := conn.IOContext(ctx, "opsnap-pool", "")
	if err != nil {
		t.Fatal(err)
	}
	v1, v2 := []byte("version 1"), []byte("version 2, longer")
	w := NewWriteOp()
	w.WriteFull(v1)
	if err := io.OperateWrite(ctx, "o", w); err != nil {
		t.Fatal(err)
	}
	id, err := io.SelfManagedSnapCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// the write's snapshot context preserves version 1 in snapshot id
	w = NewWriteOp()
	w.SetSnapContext(id, []uint64{id})
	w.WriteFullWithCRC(v2, crc32c.Checksum(v2))
	if err := io.OperateWrite(ctx, "o", w); err != nil {
		t.Fatal(err)
	}
	readAt := func(io *IOContext, snap uint64, set bool) string {
		t.Helper()
		r := NewReadOp()
		if set {
			r.SetSnap(snap)
		}
		s := r.Read(0, 0)
		if err := io.OperateRead(ctx, "o", r); err != nil {
			t.Fatal(err)
		}
		return string(s.Data)
	}
	if got := readAt(io, id, true); got != string(v1) {
		t.Fatalf("read at snapshot %d: %q", id, got)
	}
	if got := readAt(io.WithReadSnap(id), 0, true); got != string(v2) {
		t.Fatalf("read of the head overriding the IOContext's snapshot: %q", got)
	}
	if got := readAt(io.WithReadSnap(id), 0, false); got != string(v1) {
		t.Fatalf("read through an IOContext at snapshot %d: %q", id, got)
	}
	// rollback, with the same per-operation context
	w = NewWriteOp()
	w.SetSnapContext(id, []uint64{id})
	w.Rollback(id)
	if err := io.OperateWrite(ctx, "o", w); err != nil {
		t.Fatal(err)
	}
	if got := readAt(io, 0, false); got != string(v1) {
		t.Fatalf("after rollback: %q", got)
	}
	if err := io.SelfManagedSnapRemove(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// TestReadInto reads into a caller's buffer: alone in its ReadOp it is
// received there without the reply's own buffer; with other operations
// it is copied there; short objects and empty buffers read what they
// should.
func TestReadInto(t *testing.T) {
	conn := connectTest(t)
	io := testIO(t, conn, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const size = 4 << 20
	data := randomBytes(7, size)
	w := NewWriteOp()
	w.WriteWithCRC(data[:size/2], 0, crc32c.Checksum(data[:size/2]))
	w.Write(data[size/2:], size/2)
	if err := io.OperateWrite(ctx, "readinto", w); err != nil {
		t.Fatal(err)
	}

	buf := bytes.Repeat([]byte{0xa5}, size+100)
	readInto := func(extra bool, p []byte, off uint64) *ReadStep {
		t.Helper()
		r := NewReadOp()
		var st *StatStep
		if extra {
			st = r.Stat()
		}
		s := r.ReadInto(p, off)
		if err := io.OperateRead(ctx, "readinto", r); err != nil {
			t.Fatal(err)
		}
		if s.Err != nil || (st != nil && (st.Err != nil || st.Size != size)) {
			t.Fatalf("steps: %v %+v", s.Err, st)
		}
		if len(s.Data) > 0 && &s.Data[0] != &p[0] {
			t.Fatal("the step's data is not the caller's buffer")
		}
		return s
	}
	for _, extra := range []bool{false, true} {
		clear(buf)
		s := readInto(extra, buf, 0) // past the object's end
		if !bytes.Equal(s.Data, data) {
			t.Fatalf("extra %v: read %d bytes, mismatch", extra, len(s.Data))
		}
		s = readInto(extra, buf[:1000], size-10)
		if !bytes.Equal(s.Data, data[size-10:]) {
			t.Fatalf("extra %v: read at the end: %d bytes", extra, len(s.Data))
		}
		if s = readInto(extra, buf[:0], 0); len(s.Data) != 0 {
			t.Fatalf("extra %v: empty read returned %d bytes", extra, len(s.Data))
		}
	}
	r := NewReadOp()
	r.ReadInto(nil, 0)
	if err := io.OperateRead(ctx, "readinto-missing", r); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty read of a missing object: %v", err)
	}

	// alone, the read needs no buffer of its own: what is allocated per
	// read stays far below its size (a copy would allocate all of it)
	const reads = 8
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range reads {
		readInto(false, buf[:size], 0)
	}
	runtime.ReadMemStats(&m1)
	if per := (m1.TotalAlloc - m0.TotalAlloc) / reads; per > size/4 {
		t.Errorf("%d bytes allocated per %d-byte read into a buffer", per, size)
	}
}

// TestOperationString describes compound operations as Ceph's logs do.
func TestOperationString(t *testing.T) {
	w := NewWriteOp()
	w.Create(true)
	w.Exec("rbd", "copyup", []byte("data"))
	w.Write([]byte("abc"), 4)
	if got, want := w.String(), "[create,call rbd.copyup,write 4~3]"; got != want {
		t.Errorf("write: %q, want %q", got, want)
	}
	r := NewReadOp()
	r.Stat()
	r.ReadInto(make([]byte, 10), 20)
	if got, want := r.String(), "[stat,read 20~10]"; got != want {
		t.Errorf("read: %q, want %q", got, want)
	}
}
