package guestbench

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

func TestParseSwitches(t *testing.T) {
	n, err := parseSwitches("Name:\tpurerbd\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n")
	if err != nil || n != 127 {
		t.Errorf("got %d, %v; want 127", n, err)
	}
	if _, err := parseSwitches("Name:\tx\nvoluntary_ctxt_switches:\t1\n"); err == nil {
		t.Error("a status without nonvoluntary_ctxt_switches parsed")
	}
	if n, err := procSwitches(os.Getpid()); err != nil || n <= 0 {
		t.Errorf("this process: %d switches, %v", n, err)
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
