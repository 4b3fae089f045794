package guestbench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// guestStat is the whole guest's account in /proc/stat at one moment:
// the busy time of all its CPUs (everything but idle, iowait and steal,
// in seconds) and the context switches all of them have made.
type guestStat struct {
	busy     float64
	switches int64
}

// readGuestStat reads /proc/stat. The whole guest is what makes krbd,
// which runs in kernel threads and interrupts, comparable with the
// userspace servers: each run's busy time and switches are those of
// every process and kernel worker that served it, the guest program's
// own included.
func readGuestStat() (guestStat, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return guestStat{}, err
	}
	defer f.Close()
	return parseGuestStat(bufio.NewScanner(f))
}

// ReadStat reads this machine's /proc/stat as readGuestStat does: the
// busy seconds of all its CPUs and the context switches they made. The
// bench reads the host's with it around each of the guest's runs.
func ReadStat() (busy float64, switches int64, err error) {
	st, err := readGuestStat()
	return st.busy, st.switches, err
}

// switchCount is one thread's context switches: voluntary (it waited)
// and nonvoluntary (it was preempted).
type switchCount struct{ vol, invol int64 }

// threadSwitches reads the context switches of each of pid's threads
// now, by thread id.
func threadSwitches(pid int) (map[string]switchCount, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	m := make(map[string]switchCount, len(tasks))
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue // the thread ended
		}
		c, err := parseSwitches(string(b))
		if err != nil {
			return nil, fmt.Errorf("/proc/%d/task/%s/status: %w", pid, t.Name(), err)
		}
		m[t.Name()] = c
	}
	return m, nil
}

// serverSwitches is what the serving process's threads did over a run:
// how many times they were switched out in all, how many of those were
// waits, how many the busiest thread made, and how many threads made
// any. A thread that ended during the run is not counted; one that began
// counts from zero.
type serverSwitches struct {
	total, voluntary, busiest int64
	threads                   int
}

// switchesBetween compares two readings of threadSwitches.
func switchesBetween(before, after map[string]switchCount) serverSwitches {
	var s serverSwitches
	for tid, a := range after {
		b := before[tid]
		vol, n := a.vol-b.vol, a.vol-b.vol+a.invol-b.invol
		if n <= 0 {
			continue
		}
		s.total += n
		s.voluntary += vol
		s.busiest = max(s.busiest, n)
		s.threads++
	}
	return s
}

// parseSwitches reads the voluntary and nonvoluntary context switches
// of one /proc/PID/task/TID/status.
func parseSwitches(status string) (switchCount, error) {
	var c switchCount
	seen := 0
	for _, l := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || (k != "voluntary_ctxt_switches" && k != "nonvoluntary_ctxt_switches") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return switchCount{}, fmt.Errorf("%s: %w", k, err)
		}
		if k == "voluntary_ctxt_switches" {
			c.vol = n
		} else {
			c.invol = n
		}
		seen++
	}
	if seen != 2 {
		return switchCount{}, fmt.Errorf("no context switch counts")
	}
	return c, nil
}

// parseGuestStat parses the lines of /proc/stat.
func parseGuestStat(sc *bufio.Scanner) (guestStat, error) {
	var st guestStat
	var haveCPU, haveCtxt bool
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "cpu":
			// user nice system idle iowait irq softirq steal ...
			if len(f) < 6 {
				return guestStat{}, fmt.Errorf("/proc/stat: short cpu line %q", sc.Text())
			}
			var ticks int64
			for i, v := range f[1:] {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return guestStat{}, fmt.Errorf("/proc/stat: cpu line %q: %w", sc.Text(), err)
				}
				if i == 3 || i == 4 || i >= 7 {
					// idle, iowait, and steal (the host's, not the
					// guest's); guest and guest_nice are inside user
					// and nice already
					continue
				}
				ticks += n
			}
			st.busy, haveCPU = float64(ticks)/clockTicks, true
		case "ctxt":
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return guestStat{}, fmt.Errorf("/proc/stat: ctxt line %q: %w", sc.Text(), err)
			}
			st.switches, haveCtxt = n, true
		}
	}
	if err := sc.Err(); err != nil {
		return guestStat{}, fmt.Errorf("/proc/stat: %w", err)
	}
	if !haveCPU || !haveCtxt {
		return guestStat{}, fmt.Errorf("/proc/stat: no cpu or ctxt line")
	}
	return st, nil
}
