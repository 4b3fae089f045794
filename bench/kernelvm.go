package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/bench/internal/guestbench"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
	"github.com/purerbd/purerbd/rados/radostest/netns"
)

// KernelVM is what the kernel-path section measured inside a VM.
type KernelVM struct {
	// Sections are the I/O comparisons (memory disk; RBD image), kept
	// apart from the host's: the guest is software-emulated.
	Sections []*Section
	Node     *guestbench.NodeRecord
	Notes    []string // what the guest could not measure
	Skipped  string   // why nothing was measured
	Kernel   string   // guest kernel release
	CPUs     int
	MemoryMB int
	// HostCPUs is how many CPUs the host had for the VM, its qemu and
	// the cluster together (0 in runs older than the field).
	HostCPUs int
	Boot     time.Duration // guest uptime at init
	Wall     time.Duration // the whole VM run
	Cluster  string        // the cluster the guest reached
	// Clocksource is the guest kernel's clocksource as the guest read it
	// ("hpet", "tsc"); ClockForced says the bench chose it (Config.VMClock).
	Clocksource string
	ClockForced bool
	// ServerEnv is what Config.VMServerEnv added to the environment of
	// the guest's purerbd servers.
	ServerEnv []string
	// KernelArgs is what Config.VMKernelArgs added to the guest's kernel
	// command line.
	KernelArgs []string
	// Pinned says the guest program and the servers ran pinned to
	// separate vCPUs (Config.VMPin).
	Pinned bool
	// ServerPinned says only the servers ran pinned to one vCPU, the
	// guest program where the scheduler put it (Config.VMPinServer).
	ServerPinned bool
	// Traced says the guest traced its context switches in every run
	// (Config.VMTraceMM).
	Traced bool
	// FioLoaded says the block-device cases ran through fio
	// (Config.VMFioLoad).
	FioLoaded bool
	// RawDepth1 says the guest program made its depth-1 block-device
	// calls as raw system calls; false for Config.VMRuntimeSyscalls and
	// for every run before it existed.
	RawDepth1 bool
	// AIODepth32 says the guest program kept its depth-32 block-device
	// requests in flight from one goroutine through Linux AIO; false for
	// Config.VMRuntimeSyscalls and for every run before it existed, where
	// a goroutine per request called pread/pwrite through the runtime.
	AIODepth32 bool
	Elapsed    time.Duration
}

// rssAt is the node plugin's largest VmRSS with n volumes attached (0
// when not measured).
func (k *KernelVM) rssAt(n int) int64 {
	if k == nil || k.Node == nil {
		return 0
	}
	var v int64
	for _, m := range k.Node.Memory {
		if m.Attached == n {
			v = max(v, m.RSS)
		}
	}
	return v
}

// Node images: ten volumes the node plugin stages, as the target asks.
const (
	vmNodeVolumes  = 10
	vmNodeVolSize  = 64 << 20
	vmIOImageBytes = 128 << 20
	vmMemoryMB     = 1536
	vmCPUs         = 2
	nbdkitPlugin   = "/usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-memory-plugin.so"
)

// kernelVM boots Debian's kernel under qemu (TCG) with the guest program
// (purerbd-bench guest), the shipped purerbd and purerbd-csi binaries and
// nbdkit, on a tap in a network namespace where a one-OSD memstore
// cluster listens, and turns the guest's records into sections.
func (s *suite) kernelVM(ctx context.Context) *KernelVM {
	t0 := time.Now()
	k := &KernelVM{CPUs: vmCPUs, MemoryMB: vmMemoryMB, HostCPUs: goruntime.NumCPU()}
	dir := filepath.Join(s.work, "vm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		k.Skipped = err.Error()
		return k
	}
	err := withVMTB(dir, s.log, func(tb testing.TB) error { return s.runKernelVM(ctx, tb, dir, k) })
	if err != nil {
		k.Skipped = err.Error()
	}
	k.Elapsed = time.Since(t0)
	return k
}

func (s *suite) runKernelVM(ctx context.Context, tb testing.TB, dir string, k *KernelVM) error {
	host := vmtest.FindHost(tb)
	k.Kernel = host.Release
	for _, b := range []string{"purerbd", "purerbd-csi", "purerbd-bench"} {
		if _, ok := s.bins[b]; !ok {
			return fmt.Errorf("no %s binary", b)
		}
	}
	var progs []string
	for _, p := range []string{"/sbin/mkfs.ext4", "/sbin/resize2fs"} {
		if !fileExists(p) {
			return fmt.Errorf("%s not found: install the Debian package e2fsprogs", p)
		}
		progs = append(progs, p)
	}
	nbdkit := ""
	if fileExists("/usr/bin/nbdkit") && fileExists(nbdkitPlugin) {
		nbdkit = "/usr/bin/nbdkit"
		progs = append(progs, nbdkit, nbdkitPlugin)
	} else {
		k.Notes = append(k.Notes, "nbdkit or its memory plugin is not installed: the memory disk is measured without a peer")
	}
	// fio's rbd engine: librbd beside purerbd's client in the rbd-client
	// group
	fio, err := exec.LookPath("fio")
	if err == nil {
		progs = append(progs, fio)
	} else {
		fio = ""
		k.Notes = append(k.Notes, "fio is not installed: librbd is not measured in the guest")
	}
	runtime := pick(s.cfg, s.cfg.Runtime, min(s.cfg.Runtime, time.Second))
	args := []string{"/bin/purerbd-bench", "guest", "-runtime", runtime.String(), "-reps", fmt.Sprint(s.cfg.Reps),
		"-mem-size", fmt.Sprintf("%dM", vmIOImageBytes>>20), "-span", fmt.Sprint(vmIOImageBytes)}
	if s.cfg.Quick {
		args = append(args, "-quick")
	}
	if nbdkit != "" {
		args = append(args, "-nbdkit", nbdkit)
	}
	if fio != "" {
		args = append(args, "-fio", fio)
	}
	profileQD := cmp.Or(s.cfg.VMProfileQD, 32)
	if s.cfg.VMProfile > 0 {
		if profileQD != 1 && profileQD != 32 {
			return fmt.Errorf("profile queue depth %d: want 1 or 32", profileQD)
		}
		args = append(args, "-profile", s.cfg.VMProfile.String(), "-profile-qd", fmt.Sprint(profileQD))
	}
	for _, e := range s.cfg.VMServerEnv {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" || strings.ContainsAny(e, ", ") {
			return fmt.Errorf("server environment %q: want KEY=VALUE", e)
		}
	}
	switch {
	case s.cfg.VMPin && s.cfg.VMPinServer:
		return errors.New("-vm-pin and -vm-pin-server: pin both apart, or only the servers")
	case s.cfg.VMPin:
		args = append(args, "-pin")
		k.Pinned = true
	case s.cfg.VMPinServer:
		args = append(args, "-pin-server")
		k.ServerPinned = true
	}
	if s.cfg.VMFioLoad {
		if fio == "" {
			return errors.New("-vm-fio-load: fio is not installed")
		}
		args = append(args, "-fio-load")
		k.FioLoaded = true
	}
	switch {
	case s.cfg.VMRuntimeSyscalls && s.cfg.VMFioLoad:
		return errors.New("-vm-runtime-syscalls and -vm-fio-load: fio makes its own calls")
	case s.cfg.VMRuntimeSyscalls:
		args = append(args, "-runtime-syscalls")
	default:
		k.RawDepth1 = true
		k.AIODepth32 = true
	}
	if s.cfg.VMTraceMM {
		args = append(args, "-trace-mm")
		k.Traced = true
	}
	if len(s.cfg.VMServerEnv) > 0 {
		args = append(args, "-server-env", strings.Join(s.cfg.VMServerEnv, ","))
		k.ServerEnv = s.cfg.VMServerEnv
	}
	files := map[string]string{"/bin/purerbd-bench": s.bin("purerbd-bench"), "/bin/purerbd": s.bin("purerbd"),
		"/bin/purerbd-csi": s.bin("purerbd-csi"), "/etc/mke2fs.conf": "/etc/mke2fs.conf"}
	modules := []string{"nbd", "ext4", host.CRC32C(), "rbd"}
	if c := host.KernelConfig()["CONFIG_BLK_DEV_UBLK"]; c == "m" {
		modules = append(modules, "ublk_drv") // the rbd-ublk group
	}
	vmcfg := vmtest.Config{
		Modules:  modules,
		Programs: progs,
		Files:    files,
		Memory:   vmMemoryMB,
		CPUs:     vmCPUs,
		Timeout:  pick(s.cfg, 25*time.Minute, 10*time.Minute),
	}
	switch s.cfg.VMClock {
	case "":
	case VMClockTSC:
		vmcfg.KernelArgs = []string{"tsc=reliable"}
		k.ClockForced = true
	default:
		return fmt.Errorf("unknown guest clock %q (want %q or none)", s.cfg.VMClock, VMClockTSC)
	}
	for _, a := range s.cfg.VMKernelArgs {
		if a == "" || strings.ContainsAny(a, " \t\n'\"") {
			return fmt.Errorf("guest kernel argument %q: want one word", a)
		}
	}
	vmcfg.KernelArgs = append(vmcfg.KernelArgs, s.cfg.VMKernelArgs...)
	if s.cfg.VMTraceMM {
		// the event is enabled from boot: see guestbench.MMTraceKernelArgs
		vmcfg.KernelArgs = append(vmcfg.KernelArgs, guestbench.MMTraceKernelArgs()...)
	}
	k.KernelArgs = s.cfg.VMKernelArgs

	// The cluster: in a network namespace, where the guest's tap is.
	var probes clusterProbes
	if t := haveTools("ceph-mon", "ceph-osd", "ceph", "rbd", "ip"); t != "" {
		k.Notes = append(k.Notes, fmt.Sprintf("no cluster for the guest (%s is not installed): RBD and node plugin not measured", t))
	} else {
		var cleanup func()
		cleanup, probes, err = s.vmCluster(ctx, dir, k, &vmcfg, &args)
		defer cleanup()
		if err != nil {
			k.Notes = append(k.Notes, "no cluster for the guest: RBD and node plugin not measured: "+err.Error())
		}
	}
	vmcfg.Command = args
	log, err := os.Create(filepath.Join(dir, "console.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	watch := newHostWatch(log, probes.osd, probes.packets)
	vmcfg.Output = watch
	vmcfg.OnMonitor = func(m vmtest.Monitor) { watch.useMonitor(ctx, m) }
	s.log.Info("bench: booting the VM", "console", log.Name())
	res, err := vmtest.Run(ctx, tb, host, vmcfg)
	if res == nil {
		return err
	}
	k.Boot, k.Wall = res.Boot, res.Wall
	k.parseWith(res.Console, watch.results())
	k.saveProfiles(ctx, dir, res.Console, profileQD)
	if r := res.Lines(guestbench.PrefixResult); err != nil || res.ExitCode != 0 || len(r) != 1 || r[0] != "ok" {
		return fmt.Errorf("guest failed (err %v, exit %d, result %q); console in %s", err, res.ExitCode, r, log.Name())
	}
	return nil
}

// clusterProbes read what the host watch takes from the guest's
// cluster: the OSDs' CPU seconds, and the packets through the VM's NIC.
type clusterProbes struct {
	osd, packets func() (float64, error)
}

// vmCluster starts a memstore cluster in a network namespace, makes the
// images the guest uses and adds the network and the cluster's flags to
// the VM's configuration. cleanup stops the cluster and removes the
// namespace; it is never nil. probes read the cluster's OSD CPU and the
// packets through the VM's NIC (nil when the cluster did not start).
func (s *suite) vmCluster(ctx context.Context, dir string, k *KernelVM, vmcfg *vmtest.Config, args *[]string) (cleanup func(), probes clusterProbes, err error) {
	cleanup = func() {}
	ns, err := netns.Create(ctx, netns.Options{})
	if err != nil {
		return cleanup, probes, err
	}
	c, err := cephcluster.Start(ctx, cephcluster.Options{
		Netns: ns.Name, BindAddr: ns.HostIP, ObjectStore: "memstore", Pool: "rbd", PGNum: 32,
		Conf: map[string]string{"memstore_device_bytes": "8589934592", "osd_heartbeat_grace": "120"},
	})
	if err != nil {
		if cerr := ns.Close(); cerr != nil {
			s.log.Warn("bench: netns close", "err", cerr)
		}
		return cleanup, probes, err
	}
	cleanup = func() {
		if err := c.Close(); err != nil {
			s.log.Warn("bench: vm cluster close", "err", err)
		}
		if err := ns.Close(); err != nil {
			s.log.Warn("bench: netns close", "err", err)
		}
	}
	probes.osd = (&cluster{Cluster: c}).osdCPU
	// the tap is in the cluster's namespace: the OSD's view of it
	tap := ns.Taps[0]
	probes.packets = func() (float64, error) {
		pid := c.PID("osd.0")
		if pid == 0 {
			return 0, errors.New("bench: osd.0 is not running")
		}
		return netnsPackets(pid, tap)
	}
	k.Cluster = fmt.Sprintf("one mon and one memstore OSD at %s, in network namespace %s", c.MonHost(), ns.Name)
	feat := "layering,exclusive-lock,object-map,fast-diff,deep-flatten"
	// purerbd over nbd.ko, krbd, purerbd over ublk (where the guest's
	// kernel has it)
	ioImages := []string{"vm-purerbd", "vm-krbd", "vm-ublk"}
	// the clients with no block device: purerbd's rbd package, librbd
	clientImages := []string{"vm-client", "vm-librbd"}
	var nodeImages []string
	for i := 0; i < vmNodeVolumes; i++ {
		nodeImages = append(nodeImages, fmt.Sprintf("vm-node-%d", i))
	}
	for _, img := range append(ioImages, clientImages...) {
		if _, err := c.Rbd(ctx, "create", "--size", fmt.Sprintf("%dM", vmIOImageBytes>>20), "--image-feature", feat, "rbd/"+img); err != nil {
			return cleanup, probes, err
		}
	}
	for _, img := range nodeImages {
		if _, err := c.Rbd(ctx, "create", "--size", fmt.Sprintf("%dM", vmNodeVolSize>>20), "--image-feature", feat, "rbd/"+img); err != nil {
			return cleanup, probes, err
		}
	}
	out, err := c.Ceph(ctx, "osd", "pool", "ls", "detail", "-f", "json")
	if err != nil {
		return cleanup, probes, err
	}
	var pools []struct {
		ID   int64  `json:"pool_id"`
		Name string `json:"pool_name"`
	}
	if err := json.Unmarshal(out, &pools); err != nil {
		return cleanup, probes, fmt.Errorf("pool ls: %w", err)
	}
	var poolID int64
	for _, p := range pools {
		if p.Name == c.Pool {
			poolID = p.ID
		}
	}
	if poolID == 0 {
		return cleanup, probes, fmt.Errorf("pool %s not found", c.Pool)
	}
	// the key reaches the guest in its initramfs, never on the kernel's
	// command line
	keyring := filepath.Join(dir, "keyring")
	if err := os.WriteFile(keyring, []byte("[client.admin]\n\tkey = "+c.AdminKey+"\n"), 0o600); err != nil {
		return cleanup, probes, err
	}
	vmcfg.Files["/etc/ceph/keyring"] = keyring
	vmcfg.Network = &vmtest.Network{Netns: ns.Name, Tap: ns.Taps[0], GuestCIDR: ns.GuestCIDR(0), HostIP: ns.HostIP}
	*args = append(*args, "-mon", c.MonAddrs[0], "-pool", c.Pool, "-pool-id", fmt.Sprint(poolID),
		"-keyring", "/etc/ceph/keyring", "-images", strings.Join(ioImages, ","), "-client-images", strings.Join(clientImages, ","),
		"-node-images", strings.Join(nodeImages, ","), "-node-size", fmt.Sprint(vmNodeVolSize))
	return cleanup, probes, nil
}

// kernelBlockMsg matches the guest kernel's console messages about its
// nbd and rbd devices.
var kernelBlockMsg = regexp.MustCompile(`^\[\s*[0-9.]+\] (block (nbd|rbd)[0-9]+|rbd|libceph|EXT4-fs \((nbd|rbd)[0-9]+\)):`)

// parse reads the guest's records; a line it cannot read becomes a note.
func (k *KernelVM) parse(console string) {
	k.parseWith(console, nil)
}

// parseWith is parse with the host's account of each run, by
// guestbench.RunKey (nil when the host did not watch).
func (k *KernelVM) parseWith(console string, host map[string]hostRun) {
	groups := map[string]*Section{}
	var order []string
	for _, l := range strings.Split(console, "\n") {
		switch {
		case strings.HasPrefix(l, guestbench.PrefixSample):
			var r guestbench.SampleRecord
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, guestbench.PrefixSample)), &r); err != nil {
				// a kernel message can cut a console line: one run lost
				k.Notes = append(k.Notes, fmt.Sprintf("unreadable guest record %q: %v", l, err))
				continue
			}
			for _, g := range vmSectionsOf(r) {
				sec := groups[g]
				if sec == nil {
					sec = vmSection(g)
					groups[g] = sec
					order = append(order, g)
				}
				addVMSample(sec, r, host[guestbench.RunKey(r.Group, r.Case, r.Contender, r.Rep)])
			}
		case strings.HasPrefix(l, guestbench.PrefixNode):
			var n guestbench.NodeRecord
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, guestbench.PrefixNode)), &n); err != nil {
				k.Notes = append(k.Notes, fmt.Sprintf("unreadable guest record %q: %v", l, err))
				continue
			}
			k.Node = &n
		case strings.HasPrefix(l, guestbench.PrefixClock):
			k.Clocksource = strings.TrimSpace(strings.TrimPrefix(l, guestbench.PrefixClock))
		case strings.HasPrefix(l, guestbench.PrefixNote):
			k.Notes = append(k.Notes, strings.TrimPrefix(l, guestbench.PrefixNote))
		case kernelBlockMsg.MatchString(l):
			// what the guest kernel said about its block devices (at
			// loglevel 4: warnings and errors only)
			k.Notes = append(k.Notes, "guest kernel: `"+strings.TrimSpace(l)+"`")
		}
	}
	for _, g := range order {
		// a section that holds another's krbd runs is left out when its
		// own contender did not run (no ublk, no fio); any other keeps
		// its failures in sight
		if (g == "floor-ublk" || g == "rbd-librbd") && !measuredFirst(groups[g]) {
			continue
		}
		k.Sections = append(k.Sections, groups[g])
	}
}

// vmSectionsOf names the sections a guest record goes to: its group's,
// except in the rbd-client and floor groups, whose two contenders other
// than krbd (the clients; the memory disks over nbd.ko and ublk) each get
// a section against krbd, krbd's runs going to both.
func vmSectionsOf(r guestbench.SampleRecord) []string {
	switch {
	case r.Group == "rbd-client" && r.Contender == "librbd":
		return []string{"rbd-librbd"}
	case r.Group == "rbd-client" && r.Contender == "krbd":
		return []string{"rbd-client", "rbd-librbd"}
	case r.Group == "floor" && r.Contender == "nbdkit":
		return []string{"floor-nbd"}
	case r.Group == "floor" && r.Contender == "purerbd":
		return []string{"floor-ublk"}
	case r.Group == "floor" && r.Contender == "krbd":
		return []string{"floor-nbd", "floor-ublk"}
	}
	return []string{r.Group}
}

// measuredFirst says whether sec's first contender has a run: krbd's
// runs fill two sections of a group, one of which may have no other
// contender (floor-ublk where the kernel has no ublk, rbd-librbd
// without fio).
func measuredFirst(sec *Section) bool {
	for _, c := range sec.Cases {
		if len(c.Samples[sec.Contenders[0]]) > 0 {
			return true
		}
	}
	return false
}

// vmSection is the section of one guest group.
func vmSection(group string) *Section {
	switch group {
	case "memory":
		return &Section{ID: "vm-memory", Short: "VM memory disk",
			Title:      "Kernel path in the VM (software-emulated): /dev/nbdN on a memory disk, purerbd vs nbdkit",
			Contenders: []string{"purerbd", "nbdkit"},
			GuestOf:    guestCPUOf,
			CPUOf:      "serving process in the guest (/proc/PID/stat; peak RSS = VmHWM)",
			LatOf:      "per-request latency seen by the guest program",
			Method: "`purerbd nbd map --memory 128M` (the shipped binary; it attaches /dev/nbdN through netlink " +
				"over one socketpair) and `nbdkit memory 128M` on a Unix socket, attached to a second /dev/nbdN " +
				"over one connection by the guest program (NBD handshake, then NBD_CMD_CONNECT: what nbd-client " +
				"does). Both devices stay attached for the whole section and are filled first; the guest program " +
				"(`purerbd-bench guest`) runs each case on each device in turn: QD goroutines with their own " +
				"O_DIRECT descriptor issuing pread/pwrite back to back (random 4 KiB offsets; 1 MiB sequential); " +
				"at depth 1 as raw system calls, whose thread waits in the kernel as a C program's does."}
	case "rbd":
		return &Section{ID: "vm-rbd", Short: "VM RBD",
			Title:      "Kernel path in the VM (software-emulated): an RBD image as a block device, purerbd (nbd.ko) vs krbd (rbd.ko)",
			Contenders: []string{"purerbd", "krbd"},
			GuestOf:    guestCPUOf,
			CPUOf:      "serving process in the guest (krbd runs in the kernel: not attributable)",
			LatOf:      "per-request latency seen by the guest program",
			Method: "Two 128 MiB images (layering, exclusive-lock, object-map, fast-diff, deep-flatten) on a " +
				"memstore OSD in a network namespace on the host, reached over the VM's virtio NIC: one mapped " +
				"by `purerbd nbd map` (userspace rbd package behind /dev/nbdN), the other by the guest " +
				"kernel's rbd driver (/sys/bus/rbd/add_single_major, ms_mode=prefer-crc). Same guest program " +
				"and cases as the memory disk. purerbd's path crosses into a userspace process and back for every " +
				"request (nbd.ko, socket, Go runtime), krbd's stays in the kernel: under TCG every one of those " +
				"emulated instructions and switches is costly, which weighs on purerbd far more than real hardware would."}
	case "rbd-ublk":
		return &Section{ID: "vm-rbd-ublk", Short: "VM RBD ublk",
			Title:      "Kernel path in the VM (software-emulated): an RBD image as a block device, purerbd (ublk) vs krbd (rbd.ko)",
			Contenders: []string{"purerbd", "krbd"},
			GuestOf:    guestCPUOf,
			CPUOf:      "serving process in the guest (krbd runs in the kernel: not attributable)",
			LatOf:      "per-request latency seen by the guest program",
			Method: "As the nbd.ko section, in the same VM and run, on kernels with ublk: a third 128 MiB image " +
				"mapped by `purerbd device map -t ublk` (userspace rbd package behind /dev/ublkbN: requests reach " +
				"it through io_uring, one queue of depth 64, fetched and committed in batches where the kernel has " +
				"batch I/O, as sid's 7.2 does), against the same krbd image."}
	case "rbd-client":
		return &Section{ID: "vm-rbd-client", Short: "VM RBD client",
			Title:      "RBD clients in the VM (software-emulated), no block device: purerbd's rbd package vs krbd (rbd.ko)",
			Contenders: []string{"purerbd", "krbd"},
			GuestOf:    guestCPUOf,
			CPUOf:      "guest program: client and load in one process (krbd runs in the kernel: not attributable)",
			LatOf:      "per-request latency seen by the load's goroutines",
			Method: "The floor under both device paths: the same workloads as the RBD sections, run by the guest " +
				"program on a fourth 128 MiB image that it opens itself with purerbd's rbd package (as `purerbd nbd map` " +
				"opens a writable image: the exclusive lock taken at open), QD goroutines calling ReadAt/WriteAt " +
				"back to back, with no block device, kernel crossing or server process. krbd's device is mapped " +
				"again and measured in the same group, interleaved. A block device served from userspace is no faster " +
				"than the client behind it: purerbd/krbd here bounds what nbd.ko and ublk can reach."}
	case "rbd-librbd":
		return &Section{ID: "vm-rbd-librbd", Short: "VM RBD librbd",
			Title:      "RBD clients in the VM (software-emulated), no block device: librbd (fio's rbd engine) vs krbd (rbd.ko)",
			Contenders: []string{"librbd", "krbd"},
			GuestOf:    guestCPUOf,
			CPUOf:      "fio process: not measured (fio's own figures are its job thread's, not librbd's threads'; the process's total includes connecting to the cluster)",
			LatOf:      "completion latency reported by fio (clat)",
			Method: "Ceph's own userspace client in the same guest, group and runs as purerbd's rbd package: fio " +
				"(the host's, with Ceph's librbd of the cluster's release) with `ioengine=rbd`, `direct=1`, librbd's " +
				"cache off, one fio process per run, on a fifth 128 MiB image filled first, against the same krbd " +
				"runs as the section above. Each fio process connects to the cluster before its timed run, so neither " +
				"its CPU nor the whole guest's is given for librbd: throughput and latency are what this section compares."}
	case "floor-nbd":
		return &Section{ID: "vm-floor-nbd", Short: "VM floor nbd.ko",
			Title:      "The crossing alone in the VM (software-emulated): a memory disk served by nbdkit through nbd.ko vs krbd (rbd.ko) on Ceph",
			Contenders: []string{"nbdkit", "krbd"},
			GuestOf:    guestCPUOf,
			CPUOf:      "serving process in the guest (krbd runs in the kernel: not attributable)",
			LatOf:      "per-request latency seen by the guest program",
			Method: "What nbd.ko's crossing costs with nothing behind it: `nbdkit memory 128M` (the reference NBD " +
				"server, in C) attached to /dev/nbdN as in the memory-disk section, measured in one group with krbd's " +
				"device on the Ceph image, interleaved. The memory disk costs its server next to nothing and never " +
				"waits for an OSD, so nbdkit/krbd here is the most any server behind nbd.ko reaches against krbd in this " +
				"guest, whatever its backend: purerbd's nbd.ko path cannot pass it."}
	case "floor-ublk":
		return &Section{ID: "vm-floor-ublk", Short: "VM floor ublk",
			Title:      "The crossing alone in the VM (software-emulated): a memory disk served by purerbd through ublk vs krbd (rbd.ko) on Ceph",
			Contenders: []string{"purerbd", "krbd"},
			GuestOf:    guestCPUOf,
			CPUOf:      "serving process in the guest (krbd runs in the kernel: not attributable)",
			LatOf:      "per-request latency seen by the guest program",
			Method: "The same for ublk, on kernels with it: `purerbd device map -t ublk --memory 128M` (no other ublk " +
				"server is packaged for Debian) in the group of the section above, against the same krbd runs. purerbd/krbd " +
				"here bounds purerbd's ublk path on Ceph."}
	}
	return &Section{ID: "vm-" + group, Title: "Kernel path in the VM: " + group, Contenders: []string{"purerbd", "peer"}}
}

// addVMSample files one guest record under its case.
func addVMSample(sec *Section, r guestbench.SampleRecord, host hostRun) {
	c := caseNamed(sec, r.Case)
	if c == nil {
		c = newCase(r.Case, r.Unit, "", 0)
		sec.Cases = append(sec.Cases, c)
	}
	cpu, guestCPU, switches := r.CPU, r.GuestCPU, float64(r.Switches)
	if cpu < 0 {
		cpu = math.NaN()
	}
	if guestCPU < 0 || r.Switches < 0 {
		guestCPU, switches = math.NaN(), math.NaN()
	}
	serverSwitches := float64(r.ServerSwitches)
	voluntary, busiest, threads := float64(r.ServerVoluntary), float64(r.ServerBusiestThread), float64(r.ServerThreads)
	if r.ServerSwitches < 0 {
		serverSwitches = math.NaN()
	}
	if r.ServerSwitches < 0 || r.ServerVoluntary < 0 {
		voluntary, busiest, threads = math.NaN(), math.NaN(), math.NaN()
	}
	if c.Samples == nil {
		c.Samples = map[string][]Sample{}
	}
	c.Samples[r.Contender] = append(c.Samples[r.Contender], Sample{
		Value: r.Value, Ops: r.Ops, Bytes: r.Bytes, Seconds: r.Seconds, CPU: cpu, RSS: r.RSS, MeanLat: r.MeanNs,
		GuestCPU: guestCPU, Switches: switches, ServerSwitches: serverSwitches,
		ServerVoluntary: voluntary, ServerBusiestThread: busiest, ServerThreads: threads,
		Lat:         &Latency{Percentiles: []float64{50, 99, 99.9}, Nanos: []float64{r.P50Ns, r.P99Ns, r.P999Ns}},
		HostSeconds: host.seconds, HostBusy: host.busy, HostVM: host.vm, HostVCPU: host.vcpu, HostOSD: host.osd,
		HostPackets: host.packets, HostTLBFlushes: host.tlb,
	})
	if host.seconds > 0 {
		sec.HostOf = hostCPUOf
	}
}

// kernelVM is the report's first kernel-path section that measured
// something (nil when none did): the one the headline's node plugin
// row and the missing-parts list speak of.
func (r *Report) kernelVM() *KernelVM {
	for _, k := range r.KernelVMs {
		if k.Skipped == "" {
			return k
		}
	}
	if len(r.KernelVMs) > 0 {
		return r.KernelVMs[0]
	}
	return nil
}
