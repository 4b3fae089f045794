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
// (counted in dir/boots) prints consoles[k-1], or the last one beyond.
func fakeQEMU(t *testing.T, dir string, consoles ...string) string {
	t.Helper()
	var script strings.Builder
	script.WriteString("#!/bin/sh\nn=$(cat " + dir + "/boots 2>/dev/null || echo 0); n=$((n+1)); echo $n > " + dir + "/boots\n")
	for i, c := range consoles {
		cond := "[ $n -eq " + string(rune('1'+i)) + " ]"
		if i == len(consoles)-1 {
			cond = "true"
		}
		script.WriteString("if " + cond + "; then printf '%s\\n' '" + strings.ReplaceAll(c, "\n", "' '") + "'; exit 0; fi\n")
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
