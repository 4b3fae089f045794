package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Config describes one VM run.
type Config struct {
	// Modules are kernel modules to include by name ("nbd", "ext4"),
	// with their dependencies. The guest loads them itself.
	Modules []string
	// CompressModules puts modules the kernel's package ships
	// uncompressed (Debian 12) into the guest as .ko.xz; compressed ones
	// (Debian 13 on) always go in as they are.
	CompressModules bool
	// Programs are host executables to include at the same path
	// ("/sbin/mke2fs"), with their shared libraries.
	Programs []string
	// Files maps guest paths to host files to include (mode kept).
	Files map[string]string
	// Command is what init runs as its child; the run ends when it exits.
	Command []string
	// Memory in MiB (default 512), CPUs (default 2).
	Memory int
	CPUs   int
	// Timeout bounds one boot's run, boot included (default 4 minutes);
	// a boot that stalled or panicked before init is tried again with a
	// Timeout of its own, within ctx.
	Timeout time.Duration
	// BootTimeout is how long a boot may take to reach init before it is
	// stopped, its vCPUs reported, and tried again (default: 2 minutes
	// and 30 s per 64 MiB of initramfs, at most half of Timeout).
	BootTimeout time.Duration
	// Output, when set, gets the console as it comes.
	Output io.Writer
	// Network, when set, gives the guest a virtio NIC on a tap device
	// inside a network namespace (see package radostest/netns); without
	// it the guest has no network at all.
	Network *Network
	// TmpfsRoot moves the guest's root from the initramfs onto a tmpfs
	// before anything runs (copy, then switch_root, as an initramfs
	// hands over to a real root): container runtimes need a root they
	// can pivot_root away from, which the initramfs is not.
	TmpfsRoot bool
	// KernelArgs are added to the guest kernel's command line.
	KernelArgs []string
	// Ready, when set, is closed by the caller once the command has got
	// far enough that its boot is worth keeping (the e2e node is Ready).
	// A guest kernel that locks up (lockup.go) before then is stopped
	// and booted again, as one that stalls before init is; a lockup after
	// it ends the run with an error at once. Without Ready, init's
	// marker is that point.
	Ready <-chan struct{}
	// OnMonitor, when set, is given the run's qemu monitor before the
	// first boot; the same Monitor reaches every boot's qemu.
	OnMonitor func(Monitor)
}

// Network attaches the guest to a tap device in a network namespace:
// qemu runs inside the namespace (`ip netns exec`) and opens the tap by
// name. Before the command runs, init loads virtio_pci and virtio_net,
// gives eth0 GuestCIDR and waits until HostIP answers a ping, so the
// command starts with the network up.
type Network struct {
	Netns     string // namespace name
	Tap       string // tap device inside it
	GuestCIDR string // "10.77.N.10/24"
	HostIP    string // an address in the namespace the guest must reach
	MAC       string // default 52:54:00:77:00:10
}

// networkModules are the guest's NIC drivers.
var networkModules = []string{"virtio_pci", "virtio_net"}

// Result is what a run left on the console.
type Result struct {
	// Console is everything the guest printed, lines ending in "\n".
	Console string
	// ExitCode is the command's exit status, -1 when the guest never
	// reported one (it crashed, or the run timed out).
	ExitCode int
	// Boot is the guest's uptime when init started; Wall the host time of
	// the whole run.
	Boot time.Duration
	Wall time.Duration
	// NetUp is the guest's uptime when it reached Network.HostIP (0
	// without a network).
	NetUp time.Duration
	// Boots counts the boots the run took; Stalls those of them stopped
	// for not reaching init within the boot limit, Lockups those stopped
	// because the guest kernel locked up.
	Boots, Stalls, Lockups int

	stalled bool   // this boot was stopped before init by the watchdog
	lockup  string // the console line that stopped this boot as locked up
	late    bool   // the lockup came after Config.Ready (or init)
}

// Lines returns the console lines that start with prefix, prefix removed.
func (r *Result) Lines(prefix string) []string {
	var l []string
	for _, s := range strings.Split(r.Console, "\n") {
		if rest, ok := strings.CutPrefix(s, prefix); ok {
			l = append(l, rest)
		}
	}
	return l
}

// Console markers printed by init.
const (
	markInit = "vmtest: init uptime="
	markExit = "vmtest: exit="
)

var exitLine = regexp.MustCompile(`vmtest: exit=(\d+)`)

// Run builds the initramfs, boots it and waits for the guest to power
// off. An error means the VM could not be run or did not finish; the
// command's failure is in Result.ExitCode.
func Run(ctx context.Context, tb testing.TB, h Host, cfg Config) (*Result, error) {
	tb.Helper()
	if len(cfg.Command) == 0 {
		return nil, fmt.Errorf("vmtest: no command")
	}
	if cfg.Memory == 0 {
		cfg.Memory = 512
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 2
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 4 * time.Minute
	}
	dir := tb.TempDir()

	initrd := filepath.Join(dir, "initramfs.cpio")
	if cfg.Network != nil {
		n := *cfg.Network
		if n.Netns == "" || n.Tap == "" || n.GuestCIDR == "" || n.HostIP == "" {
			return nil, fmt.Errorf("vmtest: Network needs Netns, Tap, GuestCIDR and HostIP: %+v", n)
		}
		if n.MAC == "" {
			n.MAC = "52:54:00:77:00:10"
		}
		cfg.Network = &n
		cfg.Modules = append(append([]string(nil), cfg.Modules...), networkModules...)
	}
	if err := writeInitramfs(initrd, h, cfg); err != nil {
		return nil, fmt.Errorf("vmtest: initramfs: %w", err)
	}
	size := fileSize(initrd)
	watch := bootWatch{sock: monitorSocket(dir), limit: bootLimit(cfg, size)}
	tb.Logf("vmtest: kernel %s (%s), initramfs %d MiB, boot limit %v", h.Release, h.Suite, size>>20, watch.limit)
	kernel := h.Kernel
	if elf, err := elfKernel(ctx, h.Kernel, dir); err != nil {
		tb.Logf("vmtest: booting the bzImage (no ELF kernel: %v)", err)
	} else if elf != "" {
		kernel = elf
	}

	nic := "none"
	if n := cfg.Network; n != nil {
		nic = "tap,ifname=" + n.Tap + ",script=no,downscript=no,model=virtio-net-pci,mac=" + n.MAC
	}
	args := []string{
		"-accel", "tcg,thread=multi", "-cpu", "max",
		// names qemu's threads ("CPU 0/TCG"), so that the host can tell
		// the vCPUs' CPU from the device emulation's
		"-name", "vmtest,debug-threads=on",
		"-m", strconv.Itoa(cfg.Memory), "-smp", strconv.Itoa(cfg.CPUs),
		"-nographic", "-no-reboot", "-nic", nic, "-no-user-config",
		"-monitor", "unix:" + watch.sock + ",server=on,wait=off",
		"-kernel", kernel, "-initrd", initrd,
		// Nothing secret goes on the command line: it ends up in dmesg.
		"-append", strings.Join(append([]string{"console=ttyS0 panic=-1 quiet loglevel=4 cryptomgr.notests"}, cfg.KernelArgs...), " "),
	}
	if cfg.OnMonitor != nil {
		cfg.OnMonitor(Monitor{sock: watch.sock})
	}
	var (
		res                   *Result
		err                   error
		boot, stalls, lockups int
		timedOut              bool
	)
	for boot = 1; ; boot++ {
		bootCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		res, err = runQEMU(bootCtx, h, cfg, args, watch)
		timedOut = bootCtx.Err() != nil
		cancel()
		if res == nil {
			return nil, err
		}
		if res.stalled {
			stalls++
		}
		if res.lockup != "" {
			lockups++
		}
		// a guest kernel that panics before init starts ran none of the
		// command: under TCG, Debian's newer kernels now and then die
		// while they patch their own text at boot (an int3 Oops in the
		// timer interrupt), or stop without a word; that is the
		// emulator's, not the test's, and the boot is tried again; so is
		// one that locks up before the caller's Ready
		early := res.stalled || (!strings.Contains(res.Console, markInit) && strings.Contains(res.Console, "Kernel panic")) ||
			(res.lockup != "" && !res.late)
		if boot == maxBoots || ctx.Err() != nil || !early {
			break
		}
		what := "panicked"
		switch {
		case res.stalled:
			what = fmt.Sprintf("did not reach init within %v", watch.limit)
		case res.lockup != "":
			what = "locked up (" + res.lockup + ")"
		}
		tb.Logf("vmtest: the guest kernel %s (boot %d of %d); booting again:\n%s",
			what, boot, maxBoots, lastConsoleLines(res.Console, 20))
	}
	res.Boots, res.Stalls, res.Lockups = boot, stalls, lockups
	if res.stalled {
		return res, fmt.Errorf("vmtest: the guest kernel did not reach init within %v in %d boots", watch.limit, boot)
	}
	if res.lockup != "" {
		return res, fmt.Errorf("vmtest: the guest kernel locked up (%s) in boot %d", res.lockup, boot)
	}
	if timedOut {
		return res, fmt.Errorf("vmtest: the VM did not finish within %v", cfg.Timeout)
	}
	if err != nil {
		return res, fmt.Errorf("vmtest: qemu: %w", err)
	}
	if res.ExitCode < 0 {
		return res, fmt.Errorf("vmtest: the guest stopped without reporting the command's exit status")
	}
	return res, nil
}

// fileSize is path's size, 0 when it cannot be read.
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// maxBoots bounds the boots of one run whose kernel panicked or stalled
// before init.
const maxBoots = 3

// bootWatch is the watchdog of one boot: qemu's monitor socket and the
// time the boot has to reach init.
type bootWatch struct {
	sock  string
	limit time.Duration
}

// runQEMU boots the VM once with args and returns what the console
// showed; err is qemu's own failure. A guest that shows no init marker
// within watch.limit has its vCPUs reported on the console and is
// stopped (Result.stalled).
func runQEMU(ctx context.Context, h Host, cfg Config, args []string, watch bootWatch) (*Result, error) {
	cmd := exec.CommandContext(ctx, h.QEMU, args...)
	if n := cfg.Network; n != nil {
		// ip netns exec enters the namespace and execs qemu: the
		// process cmd kills on timeout is qemu itself
		cmd = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Netns, h.QEMU}, args...)...)
	}
	cmd.Stdin = nil
	cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw

	var (
		console bytes.Buffer
		mu      sync.Mutex
	)
	writeLine := func(line string) {
		mu.Lock()
		console.WriteString(line)
		mu.Unlock()
		if cfg.Output != nil {
			io.WriteString(cfg.Output, line)
		}
	}
	readDone := make(chan struct{})
	sawInit := make(chan struct{})
	// lockup is closed when a console line shows the guest locked up;
	// lockupLine is that line, lockupLate whether it came after Ready
	// (or init)
	lockup := make(chan struct{})
	var lockupLine string
	var lockupLate bool
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		initSeen, lockupSeen := false, false
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r") + "\n"
			writeLine(line)
			if !initSeen && strings.Contains(line, markInit) {
				initSeen = true
				close(sawInit)
			}
			if !lockupSeen && lockedUp(line) {
				lockupSeen = true
				lockupLine = strings.TrimSpace(line)
				lockupLate = isClosed(cfg.Ready) || (cfg.Ready == nil && initSeen)
				close(lockup)
			}
		}
		io.Copy(io.Discard, pr)
	}()

	start := time.Now()
	err := cmd.Start()
	if err != nil {
		pw.Close()
		return nil, fmt.Errorf("vmtest: start qemu: %w", err)
	}
	exited := make(chan struct{})
	lockupDone := make(chan bool, 1)
	go func() {
		select {
		case <-lockup:
			lockupReport(ctx, watch.sock, lockupLine, func(l string) { writeLine(l + "\n") })
			cmd.Process.Kill()
			lockupDone <- true
		case <-exited:
			lockupDone <- false
		}
	}()
	watchDone := make(chan bool, 1)
	go func() {
		t := time.NewTimer(watch.limit)
		defer t.Stop()
		select {
		case <-sawInit:
		case <-exited:
		case <-ctx.Done():
		case <-t.C:
			initSeen := func() bool {
				select {
				case <-sawInit:
					return true
				default:
					return false
				}
			}
			say := func(l string) { writeLine(l + "\n") }
			if stallCheck(ctx, watch.sock, watch.limit, initSeen, say) {
				cmd.Process.Kill()
				watchDone <- true
				return
			}
		}
		watchDone <- false
	}()
	err = cmd.Wait()
	close(exited)
	stalled := <-watchDone
	lockupStopped := <-lockupDone
	pw.Close()
	<-readDone
	res := &Result{Console: console.String(), ExitCode: -1, Wall: time.Since(start), stalled: stalled}
	if lockupStopped && !stalled {
		res.lockup, res.late = lockupLine, lockupLate
	}
	for _, l := range strings.Split(res.Console, "\n") {
		if _, rest, ok := strings.Cut(l, markInit); ok {
			if f, perr := strconv.ParseFloat(strings.Fields(rest + " x")[0], 64); perr == nil {
				res.Boot = time.Duration(f * float64(time.Second))
			}
		}
		if _, rest, ok := strings.Cut(l, markNet); ok {
			if f, perr := strconv.ParseFloat(strings.Fields(rest + " x")[0], 64); perr == nil {
				res.NetUp = time.Duration(f * float64(time.Second))
			}
		}
		if m := exitLine.FindStringSubmatch(l); m != nil {
			res.ExitCode, _ = strconv.Atoi(m[1])
		}
	}
	return res, err
}

// lastConsoleLines is the console's last n lines.
func lastConsoleLines(console string, n int) string {
	lines := strings.Split(strings.TrimRight(console, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// writeInitramfs assembles the guest's root file system.
func writeInitramfs(out string, h Host, cfg Config) error {
	a := newArchive()
	for _, d := range []string{"bin", "sbin", "dev", "proc", "sys", "tmp", "run", "mnt", "etc", "root"} {
		a.dir(d)
	}
	bb, err := os.ReadFile(h.Busybox)
	if err != nil {
		return err
	}
	a.file("bin/busybox", 0o755, bb)
	a.file("init", 0o755, []byte(initScript(cfg.Command, cfg.Network, cfg.TmpfsRoot)))
	if err := addModules(a, h, cfg.Modules, cfg.CompressModules); err != nil {
		return err
	}
	for _, p := range cfg.Programs {
		if err := addProgram(a, p); err != nil {
			return err
		}
	}
	for guest, host := range cfg.Files {
		st, err := os.Stat(host)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(host)
		if err != nil {
			return err
		}
		a.file(guest, uint32(st.Mode().Perm()), data)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := a.writeTo(w); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Console marker printed by init once the guest reaches the host.
const markNet = "vmtest: network up uptime="

// netScript brings eth0 up for Network (nothing without one); the run
// ends with exit 125 when the host does not answer within 30 s.
func netScript(n *Network) string {
	if n == nil {
		return ""
	}
	return `for m in virtio_pci virtio_net; do grep -q "/$m.ko" /lib/modules/*/modules.builtin || modprobe $m || { echo "vmtest: exit=125 (modprobe $m)"; poweroff -f; }; done
i=0; while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 500 ]; do usleep 20000; i=$((i+1)); done
ip link set lo up
ip link set eth0 up
ip addr add '` + n.GuestCIDR + `' dev eth0
i=0; until ping -c 1 -W 1 '` + n.HostIP + `' >/dev/null 2>&1; do i=$((i+1)); [ $i -ge 30 ] && { echo "vmtest: ` + n.HostIP + ` unreachable"; ip addr; echo "vmtest: exit=125"; poweroff -f; }; done
echo "` + markNet + `$(cut -d' ' -f1 /proc/uptime)"
`
}

// switchRootScript copies the initramfs onto a tmpfs and re-executes
// /init there as the root (Config.TmpfsRoot); the second /init finds
// the marker and goes on.
func switchRootScript(tmpfsRoot bool) string {
	if !tmpfsRoot {
		return ""
	}
	return `if [ ! -e /.vmtest-tmpfs-root ]; then
	mkdir -p /newroot && mount -t tmpfs -o size=90% tmpfs /newroot || { echo "vmtest: exit=125 (tmpfs root)"; poweroff -f; }
	for e in /*; do [ "$e" = /newroot ] || cp -a "$e" /newroot/; done
	touch /newroot/.vmtest-tmpfs-root
	exec switch_root /newroot /init
fi
`
}

// initScript is /init: mount the pseudo file systems, run the command as
// a child, report its status, power off.
func initScript(command []string, net *Network, tmpfsRoot bool) string {
	q := make([]string, len(command))
	for i, a := range command {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return `#!/bin/busybox sh
/bin/busybox --install -s /bin
` + switchRootScript(tmpfsRoot) + `mount -t devtmpfs devtmpfs /dev
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
echo
echo "` + markInit + `$(cut -d' ' -f1 /proc/uptime)"
` + netScript(net) + strings.Join(q, " ") + ` </dev/null 2>&1
rc=$?
echo "` + markExit + `$rc uptime=$(cut -d' ' -f1 /proc/uptime)"
sync
poweroff -f
`
}
