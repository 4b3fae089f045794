package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// dumpWedge prints what a wedge investigation needs when I/O stops
// progressing, most telling first and compact, because a failing test's
// output is often shown cut in the middle: the blk-mq state of the nbd
// devices from debugfs (where a request waits: requeue list, dispatch
// list, scheduler, tags in use), the kernel stacks of this process's
// threads that sit in the block layer or nbd, the kernel's list of
// blocked tasks (SysRq w) with the kernel log around it, and last the
// first goroutines of this process.
func dumpWedge(why string) {
	fmt.Printf("=== wedge: %s\n", why)
	dumpBlkMQ()
	tasks, _ := filepath.Glob("/proc/self/task/*")
	for _, t := range tasks {
		stack, err := os.ReadFile(filepath.Join(t, "stack"))
		if err != nil || len(strings.TrimSpace(string(stack))) == 0 {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(t, "comm"))
		wchan, _ := os.ReadFile(filepath.Join(t, "wchan"))
		if !strings.Contains(string(stack), "nbd") && !strings.Contains(string(stack), "genl") &&
			!strings.Contains(string(stack), "netlink") && !strings.Contains(string(stack), "blk") &&
			!strings.Contains(string(stack), "blkdev") {
			continue
		}
		fmt.Printf("=== task %s (%s, wchan %s):\n%s", filepath.Base(t), strings.TrimSpace(string(comm)), wchan, stack)
	}
	if err := os.WriteFile("/proc/sys/kernel/sysrq", []byte("1"), 0); err == nil {
		if err := os.WriteFile("/proc/sysrq-trigger", []byte("w"), 0); err == nil {
			time.Sleep(500 * time.Millisecond)
			fmt.Printf("=== kernel log (blocked tasks by sysrq w last):\n%s\n", guestio.DmesgTail(120))
		}
	}
	buf := make([]byte, 16<<10)
	fmt.Printf("=== goroutines (the first 16 KiB):\n%s\n", buf[:runtime.Stack(buf, true)])
	fmt.Printf("=== end of wedge dump\n")
}

// dumpBlkMQ prints the non-empty blk-mq debugfs files of every nbd
// device that has a configuration (a pid file), mounting debugfs if it
// is not.
func dumpBlkMQ() {
	const dbg = "/sys/kernel/debug"
	if _, err := os.Stat(filepath.Join(dbg, "block")); err != nil {
		if err := unix.Mount("debugfs", dbg, "debugfs", 0, ""); err != nil {
			fmt.Printf("=== blk-mq: mount debugfs: %v\n", err)
			return
		}
	}
	devs, _ := filepath.Glob("/sys/block/nbd*")
	for _, d := range devs {
		name := filepath.Base(d)
		pid, err := os.ReadFile(filepath.Join(d, "pid"))
		if err != nil {
			continue
		}
		hw, _ := filepath.Glob(filepath.Join(d, "mq", "*"))
		sched, _ := os.ReadFile(filepath.Join(d, "queue", "scheduler"))
		fmt.Printf("=== blk-mq %s: pid %s, %d hw queues, scheduler %s\n", name,
			strings.TrimSpace(string(pid)), len(hw), strings.TrimSpace(string(sched)))
		_ = filepath.Walk(filepath.Join(dbg, "block", name), func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || info.Mode().Perm()&0o444 == 0 {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil || len(strings.TrimSpace(string(b))) == 0 {
				return nil
			}
			rel, _ := filepath.Rel(filepath.Join(dbg, "block", name), p)
			if base := filepath.Base(rel); base == "tags" || base == "sched_tags" || strings.HasPrefix(rel, "rqos/") {
				return nil // long, and the bitmaps and busy lists say it
			}
			s := strings.TrimSpace(string(b))
			if len(s) > 600 {
				s = s[:600] + " …"
			}
			fmt.Printf("  %s: %s\n", rel, strings.ReplaceAll(s, "\n", "\n    "))
			return nil
		})
	}
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
