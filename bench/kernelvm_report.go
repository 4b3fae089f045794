package bench

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/purerbd/purerbd/bench/internal/guestbench"
)

// write prints the kernel-path section: the guest's I/O comparisons and
// the node plugin's times and memory.
func (k *KernelVM) write(b *bytes.Buffer) {
	fmt.Fprintf(b, "## Kernel path inside a VM (software-emulated): kernel %s\n\n", orDash(k.Kernel))
	fmt.Fprintf(b, "**Software-emulated:** Debian's kernel %s under qemu with TCG (no KVM), %d vCPUs and %d MiB, "+
		"booted by nbd/kernel/vmtest on the same 2-core host as everything else. Every instruction of the guest "+
		"is translated, the NIC is virtio over a tap: these figures guard against regressions and compare "+
		"the contenders inside one boot (interleaved, like the host's); they say little about real hardware, "+
		"and ratios against the host's userspace numbers mean nothing.\n\n", orDash(k.Kernel), k.CPUs, k.MemoryMB)
	k.writeClock(b)
	if len(k.ServerEnv) > 0 {
		fmt.Fprintf(b, "**Tuned servers:** the guest's purerbd servers ran with `%s` added to their environment "+
			"(`-vm-server-env`), an experiment on the Go runtime; the shipped binaries run without it.\n\n",
			strings.Join(k.ServerEnv, " "))
	}
	if len(k.KernelArgs) > 0 {
		fmt.Fprintf(b, "**Tuned guest:** the guest's kernel booted with `%s` added to its command line "+
			"(`-vm-kernel-args`), an experiment on the guest's part in each request's cost; the other sections "+
			"boot with the kernel's defaults.\n\n", strings.Join(k.KernelArgs, " "))
	}
	if k.Pinned {
		b.WriteString("**Pinned:** the guest program ran on the first vCPU and every server on the second " +
			"(`-vm-pin`), an experiment on the emulator: under TCG a vCPU that switches processes flushes its " +
			"software TLB. The other sections leave placement to the guest's scheduler.\n\n")
	}
	if k.ServerPinned {
		b.WriteString("**Servers pinned:** every server ran on the second vCPU (`-vm-pin-server`) and the guest " +
			"program where the guest's scheduler put it, an experiment on what a server can do alone about the " +
			"emulator's TLB flushes, placing no thread but its own. The other sections leave placement to the " +
			"guest's scheduler.\n\n")
	}
	if k.FioLoaded {
		b.WriteString("**Loaded by fio:** the block-device cases ran through fio's libaio engine (`-vm-fio-load`) " +
			"instead of the guest program's goroutines, an experiment on the load's own part in each request's " +
			"cost; the guest's CPU and switches per op are not taken for fio's runs. The other sections use the " +
			"guest program.\n\n")
	}
	if !k.RawDepth1 && len(k.Sections) > 0 {
		b.WriteString("**Depth 1 through the Go runtime:** the guest program's pread/pwrite at queue depth 1 went " +
			"through the Go runtime's system calls, as in every run up to 2026-12-06 22:55 UTC (or with " +
			"`-vm-runtime-syscalls`). Each blocking call let the runtime's monitor thread wake and poll: a second " +
			"thread of the load per request, which under TCG trades vCPUs with a userspace server and costs the " +
			"userspace paths TLB flushes that krbd does not pay. The sections since make those calls raw, as " +
			"a C program's thread does.\n\n")
	}
	if k.RawDepth1 && !k.AIODepth32 && len(k.Sections) > 0 {
		b.WriteString("**Depth 32 through goroutines:** the guest program kept 32 requests in flight with a " +
			"goroutine each, calling pread/pwrite through the Go runtime, as in every run up to 2026-12-07 02:31 UTC. " +
			"Each request held a thread of the load blocked in the kernel and each completion woke one, threads " +
			"that under TCG trade vCPUs with a userspace server and cost the userspace paths TLB flushes that krbd " +
			"does not pay. The sections since keep the requests in flight from one goroutine through Linux AIO, " +
			"as fio's libaio engine does.\n\n")
	}
	if k.Traced {
		b.WriteString("**Traced:** the guest traced its context switches in every run (`-vm-trace-mm`, the " +
			"kernel's sched_switch event), an experiment on whose address-space switches the emulator's TLB " +
			"flushes are; tracing slows every switch, so these runs are slower than untraced ones.\n\n")
	}
	switch {
	case k.Skipped != "" && len(k.Sections) == 0 && k.Node == nil:
		fmt.Fprintf(b, "**Not measured:** %s\n\n", k.Skipped)
	case k.Skipped != "":
		fmt.Fprintf(b, "**Incomplete:** %s\n\n", k.Skipped)
	}
	if k.Cluster != "" {
		fmt.Fprintf(b, "Cluster for the guest: %s. ", k.Cluster)
	}
	if k.Wall > 0 {
		fmt.Fprintf(b, "Guest init after %s; the VM ran %s; the section took %s.\n\n",
			k.Boot.Round(10*time.Millisecond), k.Wall.Round(time.Second), k.Elapsed.Round(time.Second))
	}
	for _, sec := range k.Sections {
		// one level down: these are parts of the kernel-path section
		var sb bytes.Buffer
		writeSection(&sb, sec, nil)
		b.WriteString("#" + sb.String())
	}
	k.writeDevicePaths(b)
	k.writeBounds(b)
	k.writeCeilings(b)
	if n := k.Node; n != nil {
		k.writeNode(b, n)
	}
	if len(k.Notes) > 0 {
		b.WriteString("Notes from the VM run:\n\n")
		for _, n := range k.Notes {
			fmt.Fprintf(b, "- %s\n", n)
		}
		b.WriteString("\n")
	}
}

// Targets of the node data path against the guest kernel's own rbd
// driver (ratios of medians, higher is better).
const (
	ublkKRBDTarget = 0.9
	nbdKRBDTarget  = 0.75
)

// section returns the kernel-path section with the given ID, or nil.
func (k *KernelVM) section(id string) *Section {
	for _, s := range k.Sections {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// writeDevicePaths compares purerbd's two device paths (ublk and nbd.ko)
// measured in the same VM, each against the krbd image measured beside
// it, when the guest kernel had both.
func (k *KernelVM) writeDevicePaths(b *bytes.Buffer) {
	nbd, ublk := k.section("vm-rbd"), k.section("vm-rbd-ublk")
	if nbd == nil || ublk == nil || nbd.Skipped != "" || ublk.Skipped != "" {
		return
	}
	b.WriteString("### purerbd's device paths against krbd, same run: ublk and nbd.ko\n\n")
	fmt.Fprintf(b, "Ratios of medians from the two sections above: each purerbd device against the krbd image "+
		"measured beside it, and the two devices against each other. CPU per op is the serving process's; "+
		"guest CPU per op is the whole guest's, which counts krbd's kernel work too (lower is better for both). "+
		"Targets: ublk ≥ %.2f× krbd, nbd.ko ≥ %.2f× krbd.\n\n", ublkKRBDTarget, nbdKRBDTarget)
	b.WriteString("| case | ublk / krbd | nbd.ko / krbd | ublk / nbd.ko | CPU per op ublk / nbd.ko | " +
		"guest CPU per op ublk / krbd | nbd.ko / krbd | targets |\n|---|---|---|---|---|---|---|---|\n")
	for _, uc := range ublk.Cases {
		nc := caseNamed(nbd, uc.Name)
		if nc == nil {
			continue
		}
		u, n := uc.Ratio("purerbd", "krbd"), nc.Ratio("purerbd", "krbd")
		un := ratio(uc.spread("purerbd").Median, nc.spread("purerbd").Median)
		cpu := ratio(spreadOf(uc.values("purerbd", Sample.CPUPerMop)).Median,
			spreadOf(nc.values("purerbd", Sample.CPUPerMop)).Median)
		guest := func(c *Case) string {
			return ratioText(ratio(spreadOf(c.values("purerbd", Sample.GuestCPUPerMop)).Median,
				spreadOf(c.values("krbd", Sample.GuestCPUPerMop)).Median), 0)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | ublk %s; nbd.ko %s |\n", uc.Name, ratioText(u, ublkKRBDTarget),
			ratioText(n, nbdKRBDTarget), ratioText(un, 0), ratioText(cpu, 0), guest(uc), guest(nc),
			measuredMet(u, ublkKRBDTarget), measuredMet(n, nbdKRBDTarget))
	}
	b.WriteString("\n")
}

// writeBounds sets each device path's ratio to krbd beside what bounds
// it in the same guest: the path's crossing alone (a memory disk served
// through it, the floor sections) and the client alone (no device, the
// client sections). Each ratio is against the krbd runs of its own
// group.
func (k *KernelVM) writeBounds(b *bytes.Buffer) {
	nbd := k.section("vm-rbd")
	floorNBD, floorUblk := k.section("vm-floor-nbd"), k.section("vm-floor-ublk")
	client, librbd := k.section("vm-rbd-client"), k.section("vm-rbd-librbd")
	if nbd == nil || (floorNBD == nil && floorUblk == nil && client == nil) {
		return
	}
	cell := func(sec *Section, name string, target float64) string {
		if !measuredSection(sec) {
			return "–"
		}
		if c := caseNamed(sec, name); c != nil {
			return ratioText(c.Ratio(sec.Contenders[0], "krbd"), target)
		}
		return "–"
	}
	b.WriteString("### What bounds the device paths: the crossing alone and the client alone\n\n")
	b.WriteString("Each device path against krbd, beside the same path serving a memory disk (no Ceph behind it: " +
		"the most any server reaches through that kernel path in this guest) and beside the RBD clients with no " +
		"device at all. Every ratio is against the krbd runs of its own group. A device served from userspace is " +
		"bounded by both: it pays the crossing and the client.\n\n")
	b.WriteString("| case | nbd.ko / krbd | memory disk over nbd.ko (nbdkit) / krbd | ublk / krbd | " +
		"memory disk over ublk (purerbd) / krbd | no device: rbd package / krbd | librbd / krbd |\n" +
		"|---|---|---|---|---|---|---|\n")
	for _, c := range nbd.Cases {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", c.Name, cell(nbd, c.Name, nbdKRBDTarget),
			cell(floorNBD, c.Name, nbdKRBDTarget), cell(k.section("vm-rbd-ublk"), c.Name, ublkKRBDTarget),
			cell(floorUblk, c.Name, ublkKRBDTarget), cell(client, c.Name, 0), cell(librbd, c.Name, 0))
	}
	b.WriteString("\n")
}

// measuredMet says whether ratio r reaches target, or that it was not
// measured.
func measuredMet(r, target float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "not measured"
	}
	return metCell(r >= target)
}

// writeNode prints the node plugin's stage and unstage times and its
// memory at each step.
func (k *KernelVM) writeNode(b *bytes.Buffer, n *guestbench.NodeRecord) {
	b.WriteString("### Node plugin in the VM: stage/unstage time and RSS with 1 and 10 volumes\n\n")
	fmt.Fprintf(b, "The shipped `purerbd-csi --node` (static, production image opener) in the guest, called over its "+
		"Unix socket by the guest program acting as the CO: NodeStageVolume of %d RBD images of %s each (ext4 volumes, "+
		"SINGLE_NODE_WRITER: open the image, attach /dev/nbdN, mkfs.ext4, mount) one after the other, a 4 MiB "+
		"file written and fsynced through each mount, then NodeUnstageVolume of each. Memory is the plugin "+
		"process's VmRSS and VmHWM (peak) from /proc/PID/status, and the Go runtime's account of the same "+
		"moment from the plugin's metrics endpoint (`go_memstats_*`): heap in use, heap free but not yet "+
		"returned to the kernel, goroutine stacks. The plugin answered %s after it was started.\n\n",
		n.Volumes, bytesCell(n.VolumeSize), secs(n.StartS))
	b.WriteString("| step | volumes attached | VmRSS | VmHWM (peak so far) | Go heap in use | heap free, kept | stacks |\n" +
		"|---|---|---|---|---|---|---|\n")
	goCell := func(v int64) string {
		if v == 0 {
			return "–"
		}
		return bytesCell(v)
	}
	for _, m := range n.Memory {
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s |\n", m.Step, m.Attached, bytesCell(m.RSS), bytesCell(m.HWM),
			goCell(m.HeapInuse), goCell(m.HeapKept), goCell(m.Stacks))
	}
	if v := k.rssAt(vmNodeVolumes); v > 0 {
		fmt.Fprintf(b, "\nTarget: RSS with %d volumes attached ≤ 64 MiB: %s (%s).\n", vmNodeVolumes, metCell(v <= nodeRSSTarget), bytesCell(v))
	}
	b.WriteString("\n| call | runs | median | p99 (nearest rank) | min | max |\n|---|---|---|---|---|---|\n")
	for _, c := range []struct {
		name string
		v    []float64
	}{{"NodeStageVolume (ext4: attach, mkfs, mount)", n.StageS}, {"NodeUnstageVolume (umount, detach, close)", n.UnstageS}} {
		if len(c.v) == 0 {
			fmt.Fprintf(b, "| %s | 0 | – | – | – | – |\n", c.name)
			continue
		}
		v := append([]float64(nil), c.v...)
		sort.Float64s(v)
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s |\n", c.name, len(v), secs(spreadOf(v).Median),
			secs(nearestRank(v, 99)), secs(v[0]), secs(v[len(v)-1]))
	}
	b.WriteString("\n")
}

// nearestRank is the p-th percentile of sorted v by the nearest rank.
func nearestRank(v []float64, p float64) float64 {
	i := int(math.Ceil(p/100*float64(len(v)))) - 1
	return v[max(0, min(i, len(v)-1))]
}

// secs formats seconds as milliseconds below 10 s.
func secs(s float64) string {
	if s < 10 {
		return num(s*1e3) + " ms"
	}
	return num(s) + " s"
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// writeClock says which clocksource the guest ran on and what that costs
// its userspace servers.
func (k *KernelVM) writeClock(b *bytes.Buffer) {
	switch {
	case k.Clocksource == "":
		return
	case k.Clocksource == "tsc" && k.ClockForced:
		fmt.Fprintf(b, "**Guest clock: tsc, kept with `tsc=reliable`** (`-vm-clock tsc`). Left to itself the kernel "+
			"finds TCG's TSCs unsynchronized and falls back to the emulated HPET; on the TSC, clock reads in the "+
			"guest's userspace stay in the vDSO, as they do on hardware and under KVM.\n\n")
	case k.Clocksource == "tsc":
		fmt.Fprintf(b, "**Guest clock: tsc.** Clock reads in the guest's userspace stay in the vDSO.\n\n")
	default:
		fmt.Fprintf(b, "**Guest clock: %s** (the kernel's choice: under TCG it finds the TSCs unsynchronized). "+
			"Every clock read in the guest's userspace is then a system call and an emulated device access, "+
			"which costs the userspace servers (purerbd, nbdkit, the Go runtime's scheduler) and not the "+
			"kernel's drivers; on hardware and under KVM clock reads stay in the vDSO.\n\n", k.Clocksource)
	}
}
