package guestbench

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPinProcess pins every thread of this process to CPU 0 and reads
// each one's mask back, then gives them their masks again.
func TestPinProcess(t *testing.T) {
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		t.Fatal(err)
	}
	if !was.IsSet(0) {
		t.Skip("CPU 0 is not this process's to use")
	}
	defer func() {
		ents, _ := os.ReadDir("/proc/self/task")
		for _, e := range ents {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				_ = unix.SchedSetaffinity(tid, &was)
			}
		}
	}()
	if err := pinProcess(os.Getpid(), 0); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var got unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &got); err != nil {
			continue // the thread ended
		}
		if got.Count() != 1 || !got.IsSet(0) {
			t.Errorf("thread %d: %d CPUs in its mask, CPU 0 %v; want CPU 0 alone", tid, got.Count(), got.IsSet(0))
		}
	}
	if err := pinProcess(1<<30, 0); err == nil {
		t.Error("no error pinning a process that is not there")
	}
}
