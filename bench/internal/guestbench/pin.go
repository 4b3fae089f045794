package guestbench

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Pinning (-pin) is an experiment on the emulator, not a setting users
// have: the guest program's threads go to the first vCPU and every
// serving process's to the second. Under TCG a vCPU that switches from
// one process to another flushes its whole software TLB, and the process
// then refills it page by page in the emulator's C code. A request that
// crosses from the guest program into a server and back switches
// processes on a vCPU each way when the two share it; pinned apart, each
// vCPU alternates between its one process and idle or kernel threads,
// which keep the last process's page tables.
//
// -pin-server pins only the servers and leaves this program to the
// scheduler: what a server, or a deployment that gives it a CPU of its
// own, can do without placing the application's threads.

// guestCPU and serverCPU are the vCPUs the guest program and the servers
// are pinned to.
const (
	guestCPU  = 0
	serverCPU = 1
)

// pinProcess pins every thread of pid to cpu; threads started later
// inherit the mask of the thread that starts them.
func pinProcess(pid, cpu int) error {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("pin %d: %w", pid, err)
	}
	var set unix.CPUSet
	set.Set(cpu)
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pin thread %d of %d to CPU %d: %w", tid, pid, cpu, err)
		}
	}
	return nil
}
