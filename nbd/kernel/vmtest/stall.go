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

// vcpuReport reads the guest's vCPU registers from qemu's monitor at
// sock, as console lines. The ELF kernel boots at its link address (no
// KASLR without the bzImage's decompressor), so the System.map of the
// kernel's -dbg package names the functions of the RIPs (Debian's
// /boot/System.map is a placeholder).
func vcpuReport(ctx context.Context, sock string) []string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return []string{"vmtest: qemu's monitor: " + err.Error()}
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	r := bufio.NewReader(conn)
	if _, err := readToPrompt(r); err != nil {
		return []string{"vmtest: qemu's monitor: " + err.Error()}
	}
	var lines []string
	for i := range vcpuSamples {
		if i > 0 {
			select {
			case <-ctx.Done():
				return append(lines, "vmtest: qemu's monitor: "+ctx.Err().Error())
			case <-time.After(time.Second):
			}
		}
		if _, err := conn.Write([]byte("info registers -a\n")); err != nil {
			return append(lines, "vmtest: qemu's monitor: "+err.Error())
		}
		out, err := readToPrompt(r)
		if err != nil {
			return append(lines, "vmtest: qemu's monitor: "+err.Error())
		}
		for _, c := range parseRegisters(out) {
			lines = append(lines, fmt.Sprintf("vmtest: sample %d vcpu %d rip=%016x hlt=%d", i+1, c.cpu, c.rip, c.hlt))
		}
	}
	return lines
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
