package guestbench

import (
	"strconv"
	"strings"
	"testing"
)

// fakeTasks names pids: 1xx are guestbench's threads, 2xx purerbd's,
// 3xx kernel threads; others have exited.
type fakeTasks struct{}

func (fakeTasks) task(pid int) task {
	switch pid / 100 {
	case 1:
		return task{process: "guestbench[100]"}
	case 2:
		return task{process: "purerbd[200]"}
	case 3:
		return task{process: "kworker/0:1[300]", kernel: true}
	}
	return task{}
}

func switchTo(cpu int, comm string, pid int) string {
	return "   x-1  [00" + string(rune('0'+cpu)) + "] d..2.  12.345: sched_switch: prev_comm=x prev_pid=1 prev_prio=120 " +
		"prev_state=S ==> next_comm=" + comm + " next_pid=" + strconv.Itoa(pid) + " next_prio=120"
}

// TestCountMMSwitches: a CPU changes address space only when a user
// task of another process follows the last user task it ran; threads of
// one process, kernel threads and the idle task between keep it.
func TestCountMMSwitches(t *testing.T) {
	trace := strings.Join([]string{
		"# tracer: nop",
		switchTo(0, "guestbench", 101),  // CPU 0's first user task: nothing to switch from
		switchTo(0, "swapper/0", 0),     // idle keeps guestbench's tables
		switchTo(0, "purerbd", 201),     // 1: guestbench→purerbd
		switchTo(0, "purerbd", 202),     // a thread of the same process
		switchTo(0, "kworker/0:1", 301), // a kernel thread keeps them
		switchTo(0, "guestbench", 102),  // 2: purerbd→guestbench
		switchTo(1, "purerbd", 203),     // CPU 1's first
		switchTo(1, "guestbench", 101),  // 3: purerbd→guestbench
		switchTo(1, "sh", 999),          // 4: an exited task, by its comm
		"not a switch line",
	}, "\n")
	sw, err := countMMSwitches(strings.NewReader(trace), fakeTasks{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"guestbench[100]→purerbd[200]": 1, "purerbd[200]→guestbench[100]": 2, "guestbench[100]→?sh": 1}
	if sw.total != 4 || len(sw.pairs) != len(want) {
		t.Fatalf("%d switches, pairs %v; want 4, %v", sw.total, sw.pairs, want)
	}
	for k, v := range want {
		if sw.pairs[k] != v {
			t.Errorf("pair %s: %d, want %d", k, sw.pairs[k], v)
		}
	}
	got := sw.summary(2)
	if !strings.HasPrefix(got, "2.00 per op (4 over 2 ops); purerbd[200]→guestbench[100] 1.00; ") {
		t.Errorf("summary %q", got)
	}
	sw.lost = true
	if got := sw.summary(2); !strings.Contains(got, "the trace lost events") {
		t.Errorf("summary of a trace that lost events: %q", got)
	}
}

func TestOverran(t *testing.T) {
	if overran([]byte("entries: 10\noverrun: 0\ncommit overrun: 0\ndropped events: 0\n")) {
		t.Error("a clean trace counted as overrun")
	}
	if !overran([]byte("entries: 10\noverrun: 5\ndropped events: 0\n")) {
		t.Error("an overrun not seen")
	}
}
