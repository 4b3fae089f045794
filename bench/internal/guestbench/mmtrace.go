package guestbench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Tracing address-space switches (-trace-mm) is an experiment on the
// emulator, like pinning: the kernel's sched_switch event is recorded
// during each run, and afterwards each CPU's sequence of tasks is read
// for the times it went from one process's page tables to another's.
// Under TCG each of those loads flushes the vCPU's whole software TLB
// (qemu's `info jit`, which the bench reads on the host, counts the
// flushes; this says whose switches they are). Kernel threads and the
// idle task keep the last process's page tables, so they do not count.
// Tracing costs the guest time at every switch, so a traced run's own
// figures are not comparable with an untraced one's.
//
// The event must be enabled on the kernel's command line
// (MMTraceKernelArgs): enabling it at run time patches the scheduler's
// text through int3 breakpoints, which under TCG the other vCPU now and
// then executes half-patched (an int3 Oops in __schedule). A run only
// turns the ring buffer on and off, which patches nothing.

// PrefixMMTrace starts the console line of a traced run's switches.
const PrefixMMTrace = "purerbd-bench mmtrace: "

// MMTraceKernelArgs enable the sched_switch event from boot, with each
// CPU's buffer large enough for a run (some ten thousand switches a
// second, a few dozen bytes each).
func MMTraceKernelArgs() []string {
	return []string{"trace_event=sched:sched_switch", "trace_buf_size=32M"}
}

// tracefs is where the guest mounts the kernel's tracing directory.
const tracefs = "/sys/kernel/tracing"

// mmSwitches is what one traced run showed.
type mmSwitches struct {
	total int            // address-space switches on all CPUs
	pairs map[string]int // by "from→to" process name
	lost  bool           // the trace overran its buffer
}

// startMMTrace clears the trace and records sched_switch until
// pauseMMTrace.
func startMMTrace() error {
	if _, err := os.Stat(filepath.Join(tracefs, "events")); err != nil {
		if err := unix.Mount("tracefs", tracefs, "tracefs", 0, ""); err != nil {
			return fmt.Errorf("mount tracefs: %w", err)
		}
	}
	on, err := os.ReadFile(filepath.Join(tracefs, "events/sched/sched_switch/enable"))
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if strings.TrimSpace(string(on)) != "1" {
		return fmt.Errorf("trace: sched_switch is not enabled: boot with %s", strings.Join(MMTraceKernelArgs(), " "))
	}
	for _, w := range []struct{ file, val string }{{"tracing_on", "0"}, {"trace", ""}, {"tracing_on", "1"}} {
		if err := os.WriteFile(filepath.Join(tracefs, w.file), []byte(w.val), 0); err != nil {
			return fmt.Errorf("trace: %w", err)
		}
	}
	return nil
}

// pauseMMTrace stops recording.
func pauseMMTrace() error {
	if err := os.WriteFile(filepath.Join(tracefs, "tracing_on"), []byte("0"), 0); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

// countMMTrace counts the address-space switches of the trace recorded
// between startMMTrace and pauseMMTrace.
func countMMTrace() (mmSwitches, error) {
	f, err := os.Open(filepath.Join(tracefs, "trace"))
	if err != nil {
		return mmSwitches{}, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	sw, err := countMMSwitches(f, procTasks{})
	if err != nil {
		return sw, err
	}
	stats, _ := filepath.Glob(filepath.Join(tracefs, "per_cpu", "cpu*", "stats"))
	for _, s := range stats {
		if b, err := os.ReadFile(s); err == nil && overran(b) {
			sw.lost = true
		}
	}
	return sw, nil
}

// overran says whether a per-CPU trace stats file counts lost events.
func overran(stats []byte) bool {
	for _, l := range strings.Split(string(stats), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && (k == "overrun" || k == "dropped events") && strings.TrimSpace(v) != "0" {
			return true
		}
	}
	return false
}

// task is what a traced pid was: the process (thread group) it belongs
// to, by name, and whether it is a kernel thread.
type task struct {
	process string // "" unknown
	kernel  bool
}

// tasks resolves a traced pid; procTasks reads /proc.
type tasks interface {
	task(pid int) task
}

type procTasks struct{}

// PF_KTHREAD in /proc/PID/stat's flags.
const pfKthread = 0x00200000

func (procTasks) task(pid int) task {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return task{}
	}
	tgid := pid
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "Tgid:"); ok {
			tgid, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	t := task{}
	if f, err := procStat(pid); err == nil && len(f) > 6 {
		flags, _ := strconv.ParseUint(f[6], 10, 64)
		t.kernel = flags&pfKthread != 0
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", tgid))
	if err != nil {
		return t
	}
	t.process = fmt.Sprintf("%s[%d]", strings.TrimSpace(string(comm)), tgid)
	return t
}

// switchLine picks the CPU and the next task out of a sched_switch line
// of the trace file.
var switchLine = regexp.MustCompile(`\[(\d+)\].* sched_switch: .* ==> next_comm=(.*) next_pid=(\d+) `)

// countMMSwitches reads a trace file and counts, on each CPU, the
// switches to a user task of another process than the last user task
// that ran there. A pid that has exited is named by its comm.
func countMMSwitches(r io.Reader, ts tasks) (mmSwitches, error) {
	sw := mmSwitches{pairs: map[string]int{}}
	last := map[int]string{} // CPU → process whose page tables it holds
	known := map[int]task{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := switchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		cpu, _ := strconv.Atoi(m[1])
		pid, _ := strconv.Atoi(m[3])
		if pid == 0 {
			continue // idle
		}
		t, ok := known[pid]
		if !ok {
			t = ts.task(pid)
			if t.process == "" {
				t.process = "?" + m[2]
			}
			known[pid] = t
		}
		if t.kernel {
			continue
		}
		prev, seen := last[cpu]
		last[cpu] = t.process
		if seen && prev != t.process {
			sw.total++
			sw.pairs[prev+"→"+t.process]++
		}
	}
	if err := sc.Err(); err != nil {
		return sw, fmt.Errorf("trace: %w", err)
	}
	return sw, nil
}

// summary is the switches per operation, the most frequent pairs first.
func (sw mmSwitches) summary(ops int64) string {
	if ops <= 0 {
		return "no operations"
	}
	type pair struct {
		name string
		n    int
	}
	var ps []pair
	for k, v := range sw.pairs {
		ps = append(ps, pair{k, v})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].n > ps[j].n || ps[i].n == ps[j].n && ps[i].name < ps[j].name })
	var b strings.Builder
	fmt.Fprintf(&b, "%.2f per op (%d over %d ops)", float64(sw.total)/float64(ops), sw.total, ops)
	if sw.lost {
		b.WriteString(", the trace lost events")
	}
	for i, p := range ps {
		if i == 8 {
			break
		}
		fmt.Fprintf(&b, "; %s %.2f", p.name, float64(p.n)/float64(ops))
	}
	return b.String()
}
