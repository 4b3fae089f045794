package guestbench

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPinProcess pins every thread of this process to the first CPU it
// may use and reads each one's mask back, then gives them their masks
// again.
func TestPinProcess(t *testing.T) {
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		t.Fatal(err)
	}
	cpu := 0
	for !was.IsSet(cpu) {
		cpu++
	}
	defer func() {
		ents, _ := os.ReadDir("/proc/self/task")
		for _, e := range ents {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				_ = unix.SchedSetaffinity(tid, &was)
			}
		}
	}()
	if err := pinProcess(os.Getpid(), cpu); err != nil {
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
		if got.Count() != 1 || !got.IsSet(cpu) {
			t.Errorf("thread %d: %d CPUs in its mask, CPU %d %v; want CPU %d alone", tid, got.Count(), cpu, got.IsSet(cpu), cpu)
		}
	}
	if err := pinProcess(1<<30, cpu); err == nil {
		t.Error("no error pinning a process that is not there")
	}
}

// TestPinFlagsExclude checks that the guest refuses both pinning
// experiments at once, before it runs anything.
func TestPinFlagsExclude(t *testing.T) {
	err := Main(t.Context(), []string{"-pin", "-pin-server"})
	if err == nil || !strings.Contains(err.Error(), "-pin and -pin-server") {
		t.Fatalf("Main(-pin -pin-server) = %v, want the flags refused", err)
	}
}
