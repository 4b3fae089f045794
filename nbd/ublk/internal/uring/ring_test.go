package uring

import (
	"errors"
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
