package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/purerbd/purerbd/bench/internal/guestbench"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest"
)

// hostCPUOf says how the kernel-path sections take the host's CPU.
const hostCPUOf = "read on the host at the marks the guest prints on its console before and after each run " +
	"(so each window also holds the marks' own trip over the serial console, a few milliseconds): the host's " +
	"busy time (/proc/stat: all its CPUs, everything but idle, iowait and steal), the CPU time of the VM's qemu " +
	"process (its vCPU threads and its device emulation), of its vCPU threads alone and of the cluster's OSD, " +
	"each over the window's length, in cores; the OSD's CPU per operation; and the packets through the VM's " +
	"NIC (its tap, both ways) per operation; and the emulator's software-TLB flushes per operation (qemu's info jit, " +
	"read through its monitor: full flushes and each MMU index a partial flush cleans, over all vCPUs; under TCG a " +
	"vCPU that switches between processes flushes its TLB and refills it page by page). Beside them, the guest's " +
	"own count of its busy vCPUs over the run (from its /proc/stat). Under TCG a vCPU costs the host a core whenever the guest runs on it, and the OSD " +
	"shares the same cores"

// hostRun is what the host did during one of the guest's runs.
type hostRun struct {
	seconds float64 // the window between the run's marks
	busy    float64 // the host's busy CPU seconds
	vm      float64 // the qemu process's CPU seconds (NaN unknown)
	vcpu    float64 // the part of vm its vCPU threads spent (NaN unknown)
	osd     float64 // the OSDs' CPU seconds (NaN unknown)
	packets float64 // packets through the VM's NIC, both ways (NaN unknown)
	tlb     float64 // the emulator's software-TLB flushes (NaN unknown)
}

// hostSnap is the host's account at one mark.
type hostSnap struct {
	at                                time.Time
	busy, vm, vcpu, osd, packets, tlb float64
}

// hostWatch reads the host's CPU around each of the guest's runs. It is
// the VM's console output: it passes everything on to out, and at each
// guestbench.MarkRecord line it reads the host's /proc/stat, the qemu
// process's and the OSDs' CPU, and the emulator's counters.
type hostWatch struct {
	out io.Writer
	// busy, vm, vcpu and osd read the host's busy seconds, the VM's, its
	// vCPU threads' and the OSDs' CPU seconds, packets the packets
	// through the VM's NIC, tlb the emulator's software-TLB flushes; all
	// but busy may be nil (not measured)
	busy                        func() (float64, error)
	vm, vcpu, osd, packets, tlb func() (float64, error)
	now                         func() time.Time

	mu   sync.Mutex
	line []byte
	open map[string]hostSnap
	runs map[string]hostRun
}

// newHostWatch watches the host, with osd reading the OSDs' CPU and
// packets the packets through the VM's NIC (both nil without a
// cluster), and passes the console on to out.
func newHostWatch(out io.Writer, osd, packets func() (float64, error)) *hostWatch {
	return &hostWatch{out: out, osd: osd, packets: packets, vm: qemuCPU, vcpu: qemuVCPUCPU, now: time.Now,
		busy: func() (float64, error) {
			b, _, err := guestbench.ReadStat()
			return b, err
		}}
}

// useMonitor has the watch read the emulator's TLB flushes through the
// VM's qemu monitor m, each read bounded by ctx and monitorTimeout.
func (w *hostWatch) useMonitor(ctx context.Context, m vmtest.Monitor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tlb = func() (float64, error) { return tcgTLBFlushes(ctx, m) }
}

// Write passes p on and acts on every whole MARK line in it.
func (w *hostWatch) Write(p []byte) (int, error) {
	n, err := w.out.Write(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		l := string(w.line[:i])
		w.line = w.line[i+1:]
		// a console line may carry the kernel's output before the record
		if j := strings.Index(l, guestbench.PrefixMark); j >= 0 {
			w.mark(l[j+len(guestbench.PrefixMark):])
		}
	}
	if len(w.line) == 0 {
		w.line = nil // no backing array kept between lines
	}
	return n, err
}

// mark takes the host's account at one of the guest's marks.
func (w *hostWatch) mark(record string) {
	var m guestbench.MarkRecord
	if json.Unmarshal([]byte(record), &m) != nil {
		return // a cut line: that run has no host figures
	}
	snap := hostSnap{at: w.now()}
	read := func(f func() (float64, error)) float64 {
		if f == nil {
			return math.NaN()
		}
		v, err := f()
		if err != nil {
			return math.NaN()
		}
		return v
	}
	snap.busy, snap.vm, snap.vcpu, snap.osd, snap.packets = read(w.busy), read(w.vm), read(w.vcpu), read(w.osd), read(w.packets)
	snap.tlb = read(w.tlb)
	key := guestbench.RunKey(m.Group, m.Case, m.Contender, m.Rep)
	switch m.Event {
	case guestbench.MarkStart:
		if w.open == nil {
			w.open = map[string]hostSnap{}
		}
		w.open[key] = snap
	case guestbench.MarkEnd:
		s0, ok := w.open[key]
		if !ok {
			return
		}
		delete(w.open, key)
		if w.runs == nil {
			w.runs = map[string]hostRun{}
		}
		w.runs[key] = hostRun{seconds: snap.at.Sub(s0.at).Seconds(), busy: snap.busy - s0.busy,
			vm: snap.vm - s0.vm, vcpu: snap.vcpu - s0.vcpu, osd: snap.osd - s0.osd, packets: snap.packets - s0.packets,
			tlb: snap.tlb - s0.tlb}
	}
}

// results returns the runs seen so far, by guestbench.RunKey.
func (w *hostWatch) results() map[string]hostRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[string]hostRun, len(w.runs))
	for k, v := range w.runs {
		m[k] = v
	}
	return m
}

// qemuCPU is the CPU time (user + system seconds) of the host's qemu
// system emulators: the bench runs one VM at a time, and finding it by
// name survives the reboots vmtest makes after a stall.
func qemuCPU() (float64, error) { return eachQEMU(procCPU) }

// qemuVCPUCPU is the part of qemuCPU that the emulators' vCPU threads
// spent (qemu names them "CPU N/TCG"); the rest is its device emulation
// and its other threads.
func qemuVCPUCPU() (float64, error) { return eachQEMU(vcpuThreadsCPU) }

// eachQEMU sums cpu over the host's qemu system emulators.
func eachQEMU(cpu func(pid int) (float64, error)) (float64, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var total float64
	found := false
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || !strings.HasPrefix(string(comm), "qemu-system") {
			continue
		}
		v, err := cpu(pid)
		if err != nil {
			continue // it ended
		}
		total, found = total+v, true
	}
	if !found {
		return 0, fmt.Errorf("bench: no qemu process on the host")
	}
	return total, nil
}

// vcpuThreadsCPU is the CPU time of pid's threads whose names start with
// "CPU ", qemu's vCPU threads.
func vcpuThreadsCPU(pid int) (float64, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var total float64
	for _, e := range ents {
		comm, err := os.ReadFile(filepath.Join(dir, e.Name(), "comm"))
		if err != nil || !strings.HasPrefix(string(comm), "CPU ") {
			continue // ended, or not a vCPU
		}
		stat, err := os.ReadFile(filepath.Join(dir, e.Name(), "stat"))
		if err != nil {
			continue
		}
		v, err := parseStatCPU(stat)
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}

// netnsPackets reads the packets received and sent through iface, as
// the network namespace of pid sees it (/proc/PID/net/dev).
func netnsPackets(pid int, iface string) (float64, error) {
	dev, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		return 0, err
	}
	return parseNetDevPackets(dev, iface)
}

// parseNetDevPackets is iface's received plus sent packets in the
// contents of a /proc/net/dev file.
func parseNetDevPackets(dev []byte, iface string) (float64, error) {
	for _, line := range strings.Split(string(dev), "\n") {
		name, counters, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) != iface {
			continue
		}
		f := strings.Fields(counters)
		if len(f) < 10 {
			return 0, fmt.Errorf("bench: short /proc/net/dev line for %s", iface)
		}
		rx, err1 := strconv.ParseUint(f[1], 10, 64)
		tx, err2 := strconv.ParseUint(f[9], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return 0, fmt.Errorf("bench: /proc/net/dev: %w", err)
		}
		return float64(rx + tx), nil
	}
	return 0, fmt.Errorf("bench: no %s in /proc/net/dev", iface)
}

// Host figures of a run, in cores over its window (NaN when not
// measured), and the OSD's CPU per operation in µs.
func (s Sample) hostCores(v float64) float64 {
	if !(s.HostSeconds > 0) {
		return math.NaN()
	}
	return v / s.HostSeconds
}

func (s Sample) hostBusyCores() float64 { return s.hostCores(s.HostBusy) }
func (s Sample) hostVMCores() float64   { return s.hostCores(s.HostVM) }
func (s Sample) hostVCPUCores() float64 {
	if s.HostVCPU == 0 {
		return math.NaN() // a run older than the field
	}
	return s.hostCores(s.HostVCPU)
}
func (s Sample) hostOSDCores() float64 { return s.hostCores(s.HostOSD) }

func (s Sample) hostOSDPerOp() float64 {
	if !(s.HostSeconds > 0) {
		return math.NaN()
	}
	return perOp(s.HostOSD, s.Ops) * 1e6
}

// hostPacketsPerOp is the packets through the VM's NIC per operation
// (NaN when not measured, or 0 in a run older than the field).
func (s Sample) hostPacketsPerOp() float64 {
	if !(s.HostSeconds > 0) {
		return math.NaN()
	}
	return perOp(s.HostPackets, s.Ops)
}

// hostTLBFlushesPerOp is the emulator's software-TLB flushes per
// operation (NaN when not measured; 0 in a run older than the field).
func (s Sample) hostTLBFlushesPerOp() float64 {
	if !(s.HostSeconds > 0) || s.HostTLBFlushes == 0 {
		return math.NaN()
	}
	return perOp(s.HostTLBFlushes, s.Ops)
}

// guestBusyVCPUs is the guest's own count of its busy CPUs over the run
// (NaN when not measured). Beside the vCPU threads' CPU on the host it
// tells time the guest counted as running that the host did not spend
// on it (a vCPU thread waiting for a lock in qemu or for a host core)
// from host CPU spent while the guest counted itself idle.
func (s Sample) guestBusyVCPUs() float64 {
	if !(s.GuestCPU > 0) || !(s.Seconds > 0) {
		return math.NaN()
	}
	return s.GuestCPU / s.Seconds
}

// writeHostCPU is the table of what the host's cores did during each
// contender's runs: whether the VM and the OSD had the cores to
// themselves or competed for them.
func writeHostCPU(b *bytes.Buffer, sec *Section) {
	fmt.Fprintf(b, "\nThe host during the runs: %s. Medians over runs.\n\n", sec.HostOf)
	b.WriteString("| case | contender | host busy, cores | qemu (the VM), cores | its vCPU threads, cores | " +
		"the guest's own count of its busy vCPUs | OSD, cores | OSD CPU µs/op | packets through the VM's NIC per op | " +
		"the emulator's TLB flushes per op |\n" +
		"|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range sec.Cases {
		for _, who := range sec.Contenders {
			if len(c.Samples[who]) == 0 {
				continue
			}
			med := func(f func(Sample) float64) string { return num(spreadOf(c.values(who, f)).Median) }
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Name, who, med(Sample.hostBusyCores),
				med(Sample.hostVMCores), med(Sample.hostVCPUCores), med(Sample.guestBusyVCPUs), med(Sample.hostOSDCores),
				med(Sample.hostOSDPerOp), med(Sample.hostPacketsPerOp), med(Sample.hostTLBFlushesPerOp))
		}
	}
}
