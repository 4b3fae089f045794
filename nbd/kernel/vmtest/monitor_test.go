package vmtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMonitorDo runs commands on a real qemu's monitor (a machine with
// no guest, so no kernel is needed), one connection each, twice: qemu
// serves one client at a time, so a Monitor that kept its connection
// would hang the second.
func TestMonitorDo(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatalf("qemu-system-x86_64 (make deps): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sock := filepath.Join(t.TempDir(), "monitor.sock")
	cmd := exec.CommandContext(ctx, qemu, "-M", "none", "-accel", "tcg", "-display", "none", "-nodefaults",
		"-monitor", "unix:"+sock+",server=on,wait=off")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	m := Monitor{sock: sock}
	var out string
	for i := 0; i < 100; i++ { // qemu takes a moment to listen
		if out, err = m.Do(ctx, "info jit"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "TLB partial flushes") {
		t.Errorf("info jit without its TLB counters:\n%s", out)
	}
	out, err = m.Do(ctx, "info status")
	if err != nil || !strings.Contains(out, "VM status") {
		t.Errorf("a second command: err %v, output:\n%s", err, out)
	}
	cancel()
	if _, err := m.Do(ctx, "info status"); err == nil {
		t.Error("Do with an ended context succeeded")
	}
}

// TestRunGivesTheMonitor: Run hands OnMonitor the socket its qemu's
// monitor listens on, once and before the first boot, though the run
// boots twice.
func TestRunGivesTheMonitor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	host := fakeHost(t, fakeQEMU(t, dir, panicBeforeInit, bootedAndExited))
	var got []Monitor
	booted := false
	cfg := Config{Command: []string{"/bin/true"}, Timeout: 30 * time.Second, OnMonitor: func(m Monitor) {
		got = append(got, m)
		_, err := os.Stat(filepath.Join(dir, "boots"))
		booted = err == nil
	}}
	res, err := Run(ctx, t, host, cfg)
	if err != nil || res.Boots != 2 {
		t.Fatalf("err %v, result %+v; want two boots", err, res)
	}
	if len(got) != 1 || filepath.Base(got[0].sock) != "monitor.sock" || booted {
		t.Errorf("OnMonitor got %+v (after a boot: %v), want one monitor.sock before any", got, booted)
	}
}
