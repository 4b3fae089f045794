package vmtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeQEMU writes a stand-in for qemu-system-x86_64 into dir: boot k
// (counted in dir/boots) prints consoles[k-1], or the last one beyond;
// a console of stallBoot prints nothing and waits to be killed, one
// ending in hangAfter prints the rest and then waits.
func fakeQEMU(t *testing.T, dir string, consoles ...string) string {
	t.Helper()
	var script strings.Builder
	script.WriteString("#!/bin/sh\nn=$(cat " + dir + "/boots 2>/dev/null || echo 0); n=$((n+1)); echo $n > " + dir + "/boots\n")
	for i, c := range consoles {
		cond := "[ $n -eq " + string(rune('1'+i)) + " ]"
		if i == len(consoles)-1 {
			cond = "true"
		}
		if c == stallBoot {
			script.WriteString("if " + cond + "; then exec sleep 600; fi\n")
			continue
		}
		end := "exit 0"
		if rest, ok := strings.CutSuffix(c, "\n"+hangAfter); ok {
			c, end = rest, "exec sleep 600"
		}
		script.WriteString("if " + cond + "; then printf '%s\\n' '" + strings.ReplaceAll(c, "\n", "' '") + "'; " + end + "; fi\n")
	}
	p := filepath.Join(dir, "qemu")
	if err := os.WriteFile(p, []byte(script.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func fakeHost(t *testing.T, qemu string) Host {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{"vmlinuz": "not a kernel", "busybox": "", "modules.dep": "", "modules.builtin": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return Host{Kernel: filepath.Join(dir, "vmlinuz"), Suite: "test", Release: "0", ModulesDir: dir,
		QEMU: qemu, Busybox: filepath.Join(dir, "busybox")}
}

const (
	panicBeforeInit = "[    1.88] Oops: int3: 0000 [#2] SMP NOPTI\n[    1.89] Kernel panic - not syncing: Fatal exception in interrupt"
	bootedAndExited = markInit + "2.10\n" + markExit + "0"
	panicAfterInit  = markInit + "2.10\n[    3.00] Kernel panic - not syncing: oops"
	stallBoot       = "(stall)"
	hangAfter       = "(hang)"
)

// TestRunBootsAgainAfterEarlyPanic: a guest kernel that panics before
// init is booted again, up to maxBoots times; one that panics after init
// started is the run's result.
func TestRunBootsAgainAfterEarlyPanic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config{Command: []string{"/bin/true"}, Timeout: 30 * time.Second}
	boots := func(dir string) string {
		b, _ := os.ReadFile(filepath.Join(dir, "boots"))
		return strings.TrimSpace(string(b))
	}

	dir := t.TempDir()
	res, err := Run(ctx, t, fakeHost(t, fakeQEMU(t, dir, panicBeforeInit, bootedAndExited)), cfg)
	if res == nil {
		t.Fatal(err)
	}
	if err != nil || res.ExitCode != 0 || boots(dir) != "2" {
		t.Errorf("early panic then a good boot: err %v, exit %d, %s boots", err, res.ExitCode, boots(dir))
	}

	dir = t.TempDir()
	res, err = Run(ctx, t, fakeHost(t, fakeQEMU(t, dir, panicBeforeInit)), cfg)
	if res == nil {
		t.Fatal(err)
	}
	if err == nil || res.ExitCode != -1 || boots(dir) != "3" {
		t.Errorf("early panics only: err %v, exit %d, %s boots (want an error after %d)", err, res.ExitCode, boots(dir), maxBoots)
	}

	dir = t.TempDir()
	_, err = Run(ctx, t, fakeHost(t, fakeQEMU(t, dir, panicAfterInit, bootedAndExited)), cfg)
	if err == nil || boots(dir) != "1" {
		t.Errorf("panic after init: err %v, %s boots (want an error after 1)", err, boots(dir))
	}
}

// TestRunBootsAgainAfterStall: a boot that shows no init marker within
// BootTimeout is stopped, its vCPUs asked for (here there is no monitor
// to answer, which the console says), and booted again; Result counts
// the boots and the stalls.
func TestRunBootsAgainAfterStall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config{Command: []string{"/bin/true"}, Timeout: 30 * time.Second, BootTimeout: time.Second}

	dir := t.TempDir()
	res, err := Run(ctx, t, fakeHost(t, fakeQEMU(t, dir, stallBoot, bootedAndExited)), cfg)
	if res == nil {
		t.Fatal(err)
	}
	if err != nil || res.ExitCode != 0 || res.Boots != 2 || res.Stalls != 1 {
		t.Errorf("a stall then a good boot: err %v, exit %d, %d boots, %d stalls", err, res.ExitCode, res.Boots, res.Stalls)
	}

	dir = t.TempDir()
	res, err = Run(ctx, t, fakeHost(t, fakeQEMU(t, dir, stallBoot)), cfg)
	if res == nil {
		t.Fatal(err)
	}
	if err == nil || !strings.Contains(err.Error(), "did not reach init") || res.Boots != maxBoots || res.Stalls != maxBoots {
		t.Errorf("stalls only: err %v, %d boots, %d stalls (want an error after %d)", err, res.Boots, res.Stalls, maxBoots)
	}
	if !strings.Contains(res.Console, "vmtest: no init after 1s") || !strings.Contains(res.Console, "qemu's monitor: dial") {
		t.Errorf("the stalled boot's console does not say what was asked:\n%s", res.Console)
	}
}

// TestParseRegisters reads vCPUs out of qemu's `info registers -a`.
func TestParseRegisters(t *testing.T) {
	out := "info registers -a\r\n\r\nCPU#0\r\nRAX=0000000000000000 RBX=ffffffff82a0c940\r\n" +
		"RIP=ffffffff81c3a0d1 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1\r\n\r\nCPU#1\r\n" +
		"RIP=ffffffff81002345 RFL=00000202 [-------] CPL=0 II=0 A20=1 SMM=0 HLT=0\r\n(qemu) "
	got := parseRegisters(out)
	want := []vcpuState{{0, 0xffffffff81c3a0d1, 1}, {1, 0xffffffff81002345, 0}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("parseRegisters = %+v, want %+v", got, want)
	}
}

// TestStallReportInVM boots guests whose init never comes (rdinit is a
// script that only sleeps) and checks that each boot is stopped at its
// limit with both vCPUs read vcpuSamples times, in the kernel's text.
func TestStallReportInVM(t *testing.T) {
	host := FindHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stall := filepath.Join(t.TempDir(), "stall")
	if err := os.WriteFile(stall, []byte("#!/bin/busybox sh\n/bin/busybox sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := Run(ctx, t, host, Config{Command: []string{"/bin/true"}, BootTimeout: 5 * time.Second,
		Files: map[string]string{"/stall": stall}, KernelArgs: []string{"rdinit=/stall"}})
	if res == nil {
		t.Fatal(err)
	}
	if err == nil || res.Stalls != maxBoots || res.Boots != maxBoots {
		t.Fatalf("boots without init: err %v, %d stalls of %d boots, want %d of %d", err, res.Stalls, res.Boots, maxBoots, maxBoots)
	}
	samples, inKernel := 0, 0
	for _, l := range res.Lines("vmtest: sample ") {
		if strings.Contains(l, " rip=") && strings.Contains(l, " hlt=") {
			samples++
		}
		if strings.Contains(l, " rip=ffffffff8") {
			inKernel++
		}
	}
	// the console is the last boot's
	if samples != vcpuSamples*2 || inKernel != samples {
		t.Errorf("%d vCPU samples (want %d), %d in kernel text; console:\n%s", samples, vcpuSamples*2, inKernel, res.Console)
	}
	t.Logf("last boot's report:\n%s", lastConsoleLines(res.Console, vcpuSamples*2+1))
}

// TestLateInitNotStalledInVM gives real boots a limit shorter than the
// boot: the watchdog pauses each guest to read it, and a guest whose
// init came before or while it was read goes on. Under load the boot
// may outlast the reads, and be stopped; but a boot whose console shows
// init must run its command to the end, never count as a stall.
func TestLateInitNotStalledInVM(t *testing.T) {
	host := FindHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, t, host, Config{Command: []string{"/bin/true"}, BootTimeout: 500 * time.Millisecond})
	if res == nil {
		t.Fatal(err)
	}
	t.Logf("%d boots, %d stalls; last boot:\n%s", res.Boots, res.Stalls, res.Console)
	if strings.Contains(res.Console, markInit) && (err != nil || res.ExitCode != 0 || res.stalled) {
		t.Errorf("the last boot reached init, yet: err %v, exit %d, stalled %v", err, res.ExitCode, res.stalled)
	}
	if !strings.Contains(res.Console, markInit) && res.Stalls != res.Boots {
		t.Errorf("the last boot did not reach init, yet only %d of %d boots stalled", res.Stalls, res.Boots)
	}
}
