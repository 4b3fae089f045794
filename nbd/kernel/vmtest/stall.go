package vmtest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A guest kernel under TCG now and then stops before init without a word
// on the console (quiet boots print only warnings): both vCPUs spin or
// idle for good. The watchdog below names where they are, from qemu's
// monitor, and has the boot tried again, as an early panic is.

// bootLimit is how long a boot may take to reach init before it counts
// as stalled: the kernel unpacks the initramfs and a TmpfsRoot guest
// copies it before init's marker, both slower under TCG the larger it
// is, so the limit grows with the archive.
func bootLimit(cfg Config, initrdBytes int64) time.Duration {
	if cfg.BootTimeout > 0 {
		return cfg.BootTimeout
	}
	limit := 2*time.Minute + time.Duration(initrdBytes/(64<<20))*30*time.Second
	return min(limit, cfg.Timeout/2)
}

// StallRoom is the time a caller's context should leave beside a run's
// Timeout for the boots that stall and are tried again, with the default
// boot limit of a small (under 64 MiB) initramfs.
const StallRoom = (maxBoots - 1) * 2 * time.Minute

// monitorSocket is the unix socket of qemu's human monitor in dir.
func monitorSocket(dir string) string { return filepath.Join(dir, "monitor.sock") }

// vcpuSamples is how often the stalled guest's vCPUs are read, one
// second apart: a RIP that moves between samples is a loop, one that
// stays with HLT=1 a guest waiting for an interrupt that never comes.
const vcpuSamples = 3

// stallCheck runs when a boot has not shown init's marker within its
// limit. It pauses the guest through qemu's monitor at sock and, if the
// marker came before the pause after all, lets it go on (false).
// Otherwise it reads the vCPUs' registers while the guest is paused,
// vcpuSamples times with a second of running between, and writes them
// to the console through say; it reports a stall (true, the guest left
// paused for the kill) unless the marker came meanwhile. Without a
// monitor it can only look at the marker. The ELF kernel boots at its
// link address (no KASLR without the bzImage's decompressor), so the
// System.map of the kernel's -dbg package names the RIPs' functions
// (Debian's /boot/System.map is a placeholder).
func stallCheck(ctx context.Context, sock string, limit time.Duration, initSeen func() bool, say func(string)) bool {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	m, err := dialMonitor(ctx, sock)
	if err != nil {
		if initSeen() {
			return false
		}
		say(fmt.Sprintf("vmtest: no init after %v; qemu's monitor: %v", limit, err))
		return true
	}
	defer m.conn.Close()
	if err := m.pause(ctx); err != nil || initSeen() {
		m.do("cont")
		return false
	}
	say(fmt.Sprintf("vmtest: no init after %v: the guest's vCPUs, paused for each sample", limit))
	sampleVCPUs(ctx, m, say)
	if initSeen() {
		say("vmtest: init came while the vCPUs were read: the boot goes on")
		m.do("cont")
		return false
	}
	return true
}

// sampleVCPUs reads the paused guest's vCPUs vcpuSamples times, letting
// it run a second between, and writes their RIPs through say; the guest
// is left paused.
func sampleVCPUs(ctx context.Context, m *monitor, say func(string)) {
	for i := range vcpuSamples {
		if i > 0 {
			if _, err := m.do("cont"); err != nil {
				say("vmtest: qemu's monitor: " + err.Error())
				break
			}
			if !sleepCtx(ctx, time.Second) || m.pause(ctx) != nil {
				say("vmtest: qemu's monitor: the samples ended early")
				break
			}
		}
		out, err := m.do("info registers -a")
		if err != nil {
			say("vmtest: qemu's monitor: " + err.Error())
			break
		}
		for _, c := range parseRegisters(out) {
			say(fmt.Sprintf("vmtest: sample %d vcpu %d rip=%016x hlt=%d", i+1, c.cpu, c.rip, c.hlt))
		}
	}
}

// monitor is a connection to qemu's human monitor.
type monitor struct {
	conn net.Conn
	r    *bufio.Reader
}

// dialMonitor connects to the monitor at sock and reads its greeting;
// ctx's deadline bounds the connection's use.
func dialMonitor(ctx context.Context, sock string) (*monitor, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	m := &monitor{conn: conn, r: bufio.NewReader(conn)}
	if _, err := readToPrompt(m.r); err != nil {
		conn.Close()
		return nil, err
	}
	return m, nil
}

// do runs one monitor command and returns its output.
func (m *monitor) do(cmd string) (string, error) {
	if _, err := m.conn.Write([]byte(cmd + "\n")); err != nil {
		return "", err
	}
	return readToPrompt(m.r)
}

// consoleDrain is how long a pause waits for the console lines the guest
// wrote before it to be read, so that init's marker is not missed.
const consoleDrain = 200 * time.Millisecond

// pause stops the guest's vCPUs and lets the console catch up.
func (m *monitor) pause(ctx context.Context) error {
	if _, err := m.do("stop"); err != nil {
		return err
	}
	if !sleepCtx(ctx, consoleDrain) {
		return ctx.Err()
	}
	return nil
}

// sleepCtx waits d, false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// readToPrompt reads the monitor's output up to its next "(qemu) ".
func readToPrompt(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for !strings.HasSuffix(b.String(), "(qemu) ") {
		c, err := r.ReadByte()
		if err != nil {
			return b.String(), err
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// vcpuState is one vCPU in `info registers -a`.
type vcpuState struct {
	cpu int
	rip uint64
	hlt int
}

var (
	cpuHeader = regexp.MustCompile(`CPU#(\d+)`)
	ripField  = regexp.MustCompile(`RIP=([0-9a-fA-F]+)`)
	hltField  = regexp.MustCompile(`HLT=(\d)`)
)

// parseRegisters picks each vCPU's RIP and HLT out of the monitor's
// `info registers -a` output.
func parseRegisters(out string) []vcpuState {
	var cpus []vcpuState
	for _, l := range strings.Split(out, "\n") {
		if m := cpuHeader.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			cpus = append(cpus, vcpuState{cpu: n, hlt: -1})
		}
		if len(cpus) == 0 {
			continue
		}
		c := &cpus[len(cpus)-1]
		if m := ripField.FindStringSubmatch(l); m != nil {
			c.rip, _ = strconv.ParseUint(m[1], 16, 64)
		}
		if m := hltField.FindStringSubmatch(l); m != nil {
			c.hlt, _ = strconv.Atoi(m[1])
		}
	}
	return cpus
}
