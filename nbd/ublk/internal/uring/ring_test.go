package uring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newRing(t *testing.T) *Ring {
	t.Helper()
	r, err := New(8)
	if errors.Is(err, ErrUnsupported) {
		t.Fatalf("this kernel offers no io_uring (kernel.io_uring_disabled, seccomp, or a kernel before 5.1), which these tests need: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestWake checks that a goroutine's Wake ends an Enter that waits, and
// that the ring asks to be armed again afterwards.
func TestWake(t *testing.T) {
	r := newRing(t)
	for round := range 3 {
		if err := r.ArmWake(); err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(20 * time.Millisecond)
			r.Wake()
		}()
		start := time.Now()
		if err := r.Enter(true); err != nil {
			t.Fatal(err)
		}
		cqes := r.Reap(nil)
		if len(cqes) != 1 || cqes[0].UserData != WakeUserData || cqes[0].Res != 8 {
			t.Fatalf("round %d: completions %+v, want one wake-up read of 8 bytes", round, cqes)
		}
		if d := time.Since(start); d < 10*time.Millisecond {
			t.Fatalf("round %d: Enter returned after %v, before the wake-up", round, d)
		}
		if r.wakeLive {
			t.Fatal("wake-up still marked as queued after its completion")
		}
	}
}

// TestURingCmdOnPlainFile checks the SQE layout end to end: a URING_CMD
// on a file whose driver has no uring_cmd completes with EOPNOTSUPP and
// its user data.
func TestURingCmdOnPlainFile(t *testing.T) {
	r := newRing(t)
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := r.URingCmd(int(f.Fd()), 1, make([]byte, CmdSize), 42); err != nil {
		t.Fatal(err)
	}
	if err := r.URingCmd(int(f.Fd()), 1, make([]byte, CmdSize+1), 43); err == nil {
		t.Fatal("a command longer than the SQE's area was taken")
	}
	if err := r.Enter(true); err != nil {
		t.Fatal(err)
	}
	cqes := r.Reap(nil)
	if len(cqes) != 1 || cqes[0].UserData != 42 || cqes[0].Res != -int32(unix.EOPNOTSUPP) {
		t.Fatalf("completions %+v, want user data 42 with -EOPNOTSUPP", cqes)
	}
}

// TestSubmit checks that Submit hands every queued entry to the kernel
// without waiting: commands the kernel completes while they are
// submitted are there to reap, and Enter then makes no call.
func TestSubmit(t *testing.T) {
	r := newRing(t)
	if err := r.Submit(); err != nil {
		t.Fatalf("Submit with nothing queued: %v", err)
	}
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 3 {
		if err := r.URingCmd(int(f.Fd()), 1, make([]byte, CmdSize), uint64(10+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if r.toSubmit != 0 {
		t.Fatalf("%d entries left unsubmitted", r.toSubmit)
	}
	if err := r.Enter(true); err != nil {
		t.Fatal(err)
	}
	cqes := r.Reap(nil)
	if len(cqes) != 3 {
		t.Fatalf("completions %+v, want three", cqes)
	}
	for i, c := range cqes {
		if c.UserData != uint64(10+i) || c.Res != -int32(unix.EOPNOTSUPP) {
			t.Fatalf("completion %d: %+v, want user data %d with -EOPNOTSUPP", i, c, 10+i)
		}
	}
}

// TestFull checks that a full submission queue is reported, not
// overwritten.
func TestFull(t *testing.T) {
	r := newRing(t)
	n := 0
	for ; n < 100; n++ {
		if err := r.URingCmd(-1, 0, nil, uint64(n)); err != nil {
			if !errors.Is(err, ErrNoSQE) {
				t.Fatal(err)
			}
			break
		}
	}
	if n != int(r.sqEntries) {
		t.Fatalf("took %d entries, ring has %d", n, r.sqEntries)
	}
}

// TestWaitInPoller checks that Wait parks until a Wake from another
// goroutine completes the wake-up read.
func TestWaitInPoller(t *testing.T) {
	r := newRing(t)
	if err := r.ArmWake(); err != nil {
		t.Fatal(err)
	}
	if err := r.Enter(false); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		r.Wake()
	}()
	start := time.Now()
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 10*time.Millisecond {
		t.Fatalf("Wait returned after %v, before the wake-up", d)
	}
	if cqes := r.Reap(nil); len(cqes) != 1 || cqes[0].UserData != WakeUserData {
		t.Fatalf("completions %+v, want the wake-up", cqes)
	}
}

// TestWakeDuringClose checks that Wake from other goroutines races
// neither with Close nor writes after it (run under -race).
func TestWakeDuringClose(t *testing.T) {
	r, err := New(8)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				r.Wake()
			}
		}
	}()
	time.Sleep(5 * time.Millisecond)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r.Wake() // after Close: nothing to write to
	close(stop)
	<-done
	if r.wakeFD != -1 {
		t.Fatalf("wake-up descriptor %d left after Close", r.wakeFD)
	}
}

// TestBufRing checks a provided buffer ring against the kernel: reads
// with buffer select take the group's buffers, report them in their
// completions, and get buffers again only after Recycle (two buffers,
// five reads).
func TestBufRing(t *testing.T) {
	r := newRing(t)
	b, err := r.RegisterBufRing(7, 2, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	read := func(userData uint64) CQE {
		t.Helper()
		sqe, err := r.nextSQE()
		if err != nil {
			t.Fatal(err)
		}
		sqe[0] = opRead
		sqe[1] = sqeBufferSelect
		binary.LittleEndian.PutUint32(sqe[4:], uint32(p[0]))
		binary.LittleEndian.PutUint32(sqe[24:], 16)
		binary.LittleEndian.PutUint64(sqe[32:], userData)
		binary.LittleEndian.PutUint16(sqe[40:], b.Group())
		if err := r.Enter(true); err != nil {
			t.Fatal(err)
		}
		cqes := r.Reap(nil)
		if len(cqes) != 1 || cqes[0].UserData != userData {
			t.Fatalf("completions %+v, want one with user data %d", cqes, userData)
		}
		return cqes[0]
	}
	for i := range 5 {
		msg := fmt.Sprintf("message %d", i)
		if _, err := unix.Write(p[1], []byte(msg)); err != nil {
			t.Fatal(err)
		}
		c := read(uint64(i))
		id, ok := c.BufferID()
		if !ok || c.Res != int32(len(msg)) {
			t.Fatalf("read %d: completion %+v, want %d bytes in a provided buffer", i, c, len(msg))
		}
		got, err := b.Buf(id, int(c.Res))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != msg {
			t.Fatalf("read %d: buffer %d holds %q, want %q", i, id, got, msg)
		}
		if i == 1 {
			// both buffers are taken: a read now finds none
			if _, err := unix.Write(p[1], []byte("x")); err != nil {
				t.Fatal(err)
			}
			if c := read(100); c.Res != -int32(unix.ENOBUFS) {
				t.Fatalf("read with no buffer left: completion %+v, want ENOBUFS", c)
			}
			var x [1]byte
			if _, err := unix.Read(p[0], x[:]); err != nil {
				t.Fatal(err)
			}
			b.Recycle(0)
			b.Recycle(1)
		} else if i > 1 {
			b.Recycle(id)
		}
	}
	if _, err := b.Buf(2, 1); err == nil {
		t.Fatal("Buf accepted a buffer ID beyond the group")
	}
}
