package guestbench

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

func TestParseSwitches(t *testing.T) {
	c, err := parseSwitches("Name:\tpurerbd\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n")
	if err != nil || c != (switchCount{vol: 120, invol: 7}) {
		t.Errorf("got %+v, %v; want 120 voluntary, 7 not", c, err)
	}
	if _, err := parseSwitches("Name:\tx\nvoluntary_ctxt_switches:\t1\n"); err == nil {
		t.Error("a status without nonvoluntary_ctxt_switches parsed")
	}
	m, err := threadSwitches(os.Getpid())
	if err != nil || len(m) == 0 {
		t.Fatalf("this process: %v, %v", m, err)
	}
	var total int64
	for _, c := range m {
		total += c.vol + c.invol
	}
	if total <= 0 {
		t.Errorf("this process's threads: %v", m)
	}
}

// TestSwitchesBetween: per thread, the later reading minus the earlier;
// a thread that began counts from zero, one that ended or did nothing
// is left out.
func TestSwitchesBetween(t *testing.T) {
	before := map[string]switchCount{"1": {vol: 10, invol: 1}, "2": {vol: 5}, "3": {vol: 7, invol: 7}, "4": {vol: 2}}
	after := map[string]switchCount{"1": {vol: 40, invol: 6}, "2": {vol: 5}, "3": {vol: 9, invol: 9}, "5": {vol: 3, invol: 1}}
	got := switchesBetween(before, after)
	want := serverSwitches{total: 35 + 4 + 4, voluntary: 30 + 2 + 3, busiest: 35, threads: 3}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestParseGuestStat(t *testing.T) {
	stat := "cpu  100 20 300 5000 40 6 7 900 50 0\n" +
		"cpu0 50 10 150 2500 20 3 3 450 25 0\n" +
		"intr 12345 1 2 3\n" +
		"ctxt 987654\n" +
		"btime 1700000000\n"
	st, err := parseGuestStat(bufio.NewScanner(strings.NewReader(stat)))
	if err != nil {
		t.Fatal(err)
	}
	// user, nice, system, irq, softirq: idle, iowait and steal are not
	// busy, and guest time is already inside user.
	if want := float64(100+20+300+6+7) / clockTicks; st.busy != want {
		t.Errorf("busy %v s, want %v", st.busy, want)
	}
	if st.switches != 987654 {
		t.Errorf("switches %d", st.switches)
	}
	for _, bad := range []string{"cpu 1 2 3\nctxt 5\n", "cpu 1 2 3 4 5 x\nctxt 5\n", "cpu 1 2 3 4 5 6\n", "ctxt 5\n"} {
		if _, err := parseGuestStat(bufio.NewScanner(strings.NewReader(bad))); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
