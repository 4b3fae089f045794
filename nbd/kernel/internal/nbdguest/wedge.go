package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// dumpWedge prints what a wedge investigation needs when I/O stops
// progressing: every goroutine of this process, the kernel stack of each
// of its threads, and the kernel's list of blocked (D state) tasks
// (SysRq w), so that a hung netlink request or a writer stuck in the
// block layer shows where it waits.
func dumpWedge(why string) {
	fmt.Printf("=== wedge: %s\n", why)
	buf := make([]byte, 1<<20)
	fmt.Printf("=== goroutines:\n%s\n", buf[:runtime.Stack(buf, true)])
	tasks, _ := filepath.Glob("/proc/self/task/*")
	for _, t := range tasks {
		stack, err := os.ReadFile(filepath.Join(t, "stack"))
		if err != nil || len(strings.TrimSpace(string(stack))) == 0 {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(t, "comm"))
		wchan, _ := os.ReadFile(filepath.Join(t, "wchan"))
		if !strings.Contains(string(stack), "nbd") && !strings.Contains(string(stack), "genl") &&
			!strings.Contains(string(stack), "netlink") && !strings.Contains(string(stack), "blk") {
			continue
		}
		fmt.Printf("=== task %s (%s, wchan %s):\n%s", filepath.Base(t), strings.TrimSpace(string(comm)), wchan, stack)
	}
	if err := os.WriteFile("/proc/sys/kernel/sysrq", []byte("1"), 0); err == nil {
		if err := os.WriteFile("/proc/sysrq-trigger", []byte("w"), 0); err == nil {
			time.Sleep(500 * time.Millisecond)
			fmt.Printf("=== blocked tasks (sysrq w):\n%s\n", guestio.DmesgTail(400))
		}
	}
	fmt.Printf("=== end of wedge dump\n")
}

// watchWedge calls dumpWedge once if progress() has not moved for quiet,
// until stop is closed.
func watchWedge(stop <-chan struct{}, quiet time.Duration, progress func() int64, why string) {
	last, since := progress(), time.Now()
	for {
		select {
		case <-stop:
			return
		case <-time.After(250 * time.Millisecond):
		}
		if p := progress(); p != last {
			last, since = p, time.Now()
			continue
		}
		if time.Since(since) >= quiet {
			dumpWedge(fmt.Sprintf("%s: no progress for %v", why, time.Since(since).Round(time.Second)))
			return
		}
	}
}
