package vmtest

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestLockedUp reads the guest kernel's soft-lockup and Oops reports: a
// CPU stuck for lockupLimit or more is a lockup, a shorter report is not;
// the oopsLimit-th Oops is, an earlier one is not.
func TestLockedUp(t *testing.T) {
	for line, want := range map[string]bool{
		"[  864.464781] watchdog: BUG: soft lockup - CPU#1 stuck for 704s! [kube:259]":        true,
		"[  880.364771] watchdog: BUG: soft lockup - CPU#0 stuck for 60s! [ksoftirqd/0:14]\n": true,
		"[   48.090228] watchdog: BUG: soft lockup - CPU#1 stuck for 23s! [migration/1:12]":   false,
		"[  889.144787] rcu: INFO: rcu_preempt self-detected stall on CPU":                    false,
		"vmtest: init uptime=2.10":                                false,
		"[   14.981234] Oops: Oops: 0000 [#25] PREEMPT SMP NOPTI": true,
		"[   14.971234] Oops: 0000 [#10] SMP PTI":                 true,
		"[    9.100000] Oops: general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#12] PREEMPT SMP": true,
		"[    3.200000] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI":                                                                       false,
		"[    3.300000] Oops: 0000 [#9] SMP PTI":                                                                                       false,
		"[    3.300000] BUG: kernel NULL pointer dereference, address: 0000000000000018":                                               false,
	} {
		if got := lockedUp(line); got != want {
			t.Errorf("lockedUp(%q) = %v, want %v", line, got, want)
		}
	}
}

// Consoles of fake boots that lock up: the watchdog's first report, which
// the guest may survive, and one past lockupLimit, after which the fake
// waits to be killed as a locked-up guest would.
const (
	shortLockup      = "[   30.00] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [kube:259]"
	lockupLine       = "[  100.00] watchdog: BUG: soft lockup - CPU#1 stuck for 64s! [kube:259]"
	lockupAfterInit  = markInit + "2.10\n" + lockupLine + "\n" + hangAfter
	lockupBeforeInit = lockupLine + "\n" + hangAfter
	oopsStorm        = markInit + "2.10\n[   14.98] Oops: Oops: 0000 [#9] PREEMPT SMP NOPTI\n[   14.98] Oops: Oops: 0000 [#10] PREEMPT SMP NOPTI\n" + hangAfter
)

// TestRunLockups: a boot whose kernel locks up is stopped at once, not
// left to its Timeout. Before init, or before Config.Ready is closed, it
// is booted again; after them the run ends with the lockup as its error.
// A shorter report the guest survives stops nothing.
func TestRunLockups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := Config{Command: []string{"/bin/true"}, Timeout: time.Minute}
	closed := make(chan struct{})
	close(closed)
	for _, c := range []struct {
		name     string
		ready    <-chan struct{}
		consoles []string
		ok       bool
		boots    int
		lockups  int
	}{
		{"after init, no Ready", nil, []string{lockupAfterInit, bootedAndExited}, false, 1, 1},
		{"before init", nil, []string{lockupBeforeInit, bootedAndExited}, true, 2, 1},
		{"before Ready", make(chan struct{}), []string{lockupAfterInit, bootedAndExited}, true, 2, 1},
		{"before Ready, every boot", make(chan struct{}), []string{lockupAfterInit}, false, maxBoots, maxBoots},
		{"after Ready", closed, []string{lockupAfterInit, bootedAndExited}, false, 1, 1},
		{"Oops storm after Ready", closed, []string{oopsStorm, bootedAndExited}, false, 1, 1},
		{"survived", nil, []string{markInit + "2.10\n" + shortLockup + "\n" + markExit + "0"}, true, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := cfg
			cfg.Ready = c.ready
			t0 := time.Now()
			res, err := Run(ctx, t, fakeHost(t, fakeQEMU(t, t.TempDir(), c.consoles...)), cfg)
			if res == nil {
				t.Fatal(err)
			}
			if (err == nil) != c.ok || res.Boots != c.boots || res.Lockups != c.lockups {
				t.Fatalf("err %v, %d boots, %d lockups; want ok=%v after %d boots, %d lockups; console:\n%s",
					err, res.Boots, res.Lockups, c.ok, c.boots, c.lockups, res.Console)
			}
			if !c.ok && !strings.Contains(err.Error(), "locked up") {
				t.Errorf("err %v does not name the lockup", err)
			}
			if time.Since(t0) > cfg.Timeout/2 {
				t.Errorf("the run took %v: a locked-up guest was left to its timeout", time.Since(t0))
			}
		})
	}
}
