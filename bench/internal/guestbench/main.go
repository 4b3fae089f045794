package guestbench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// options are the guest's flags.
type options struct {
	purerbd, purerbdCSI, nbdkit string
	memSize                     string
	span                        int64
	runtime                     time.Duration
	reps                        int
	quick                       bool
	// the cluster, when the guest has one
	mon, user, keyring, pool string
	poolID                   int64
	images                   string // purerbd's image,krbd's image[,purerbd's ublk image]
	nodeImages               string // comma-separated images the node plugin stages
	// clientImages are the images of the rbd-client group: purerbd's
	// rbd package's, and librbd's when fio is given
	clientImages string
	fio          string
	nodeSize     int64
	// profile, when set, is how long each purerbd server (and the rbd
	// package alone) is profiled per 4 KiB case of depth profileQD
	// after the measured runs
	profile   time.Duration
	profileQD int
	// serverEnv is added to the environment of every purerbd server
	serverEnv []string
	// pin puts the guest program on one vCPU and the servers on the
	// other (pin.go): an experiment on the emulator
	pin bool
	// pinServer puts only the servers on the second vCPU and leaves
	// this program to the scheduler: what a server can do alone
	pinServer bool
	// traceMM counts each run's address-space switches through the
	// kernel's scheduler trace (mmtrace.go): an experiment on the
	// emulator
	traceMM bool
	// fioLoad runs the device cases through fio's libaio engine rather
	// than the guest program's own goroutines: an experiment on the
	// guest program's part in each request's cost
	fioLoad bool
	// runtimeSyscalls has the block-device cases call pread and pwrite
	// through the Go runtime from a goroutine per request in flight, as
	// before raw calls (rawFile) and Linux AIO (runAIO): an experiment on
	// the load's own runtime threads
	runtimeSyscalls bool
}

// Main is `purerbd-bench guest ARGS`: it runs the I/O comparisons and the
// node plugin measurements and prints the records (see the package
// documentation). It returns an error only when nothing could be run.
func Main(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("guest", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.purerbd, "purerbd", "/bin/purerbd", "purerbd binary")
	fs.StringVar(&o.purerbdCSI, "purerbd-csi", "/bin/purerbd-csi", "purerbd-csi binary")
	fs.StringVar(&o.nbdkit, "nbdkit", "", "nbdkit binary (empty: no memory peer)")
	fs.StringVar(&o.memSize, "mem-size", "128M", "size of the memory disks")
	fs.Int64Var(&o.span, "span", 128<<20, "bytes of each device the workloads cover")
	fs.DurationVar(&o.runtime, "runtime", 2*time.Second, "measured time per run")
	fs.IntVar(&o.reps, "reps", 3, "repetitions per contender and case")
	fs.BoolVar(&o.quick, "quick", false, "fewer cases")
	fs.StringVar(&o.mon, "mon", "", "mon_host of the cluster (empty: no RBD groups)")
	fs.StringVar(&o.user, "user", "admin", "Ceph user, without client.")
	fs.StringVar(&o.keyring, "keyring", "/etc/ceph/keyring", "keyring holding the user's key")
	fs.StringVar(&o.pool, "pool", "rbd", "pool")
	fs.Int64Var(&o.poolID, "pool-id", 0, "pool id (for CSI volume IDs)")
	fs.StringVar(&o.images, "images", "", "two images, purerbd's and krbd's, and a third for purerbd over ublk where the kernel has it: IMG1,IMG2[,IMG3]")
	fs.StringVar(&o.nodeImages, "node-images", "", "images the node plugin stages, comma-separated")
	fs.StringVar(&o.clientImages, "client-images", "", "images for the clients with no block device, beside krbd: purerbd's rbd package's and librbd's: IMG1[,IMG2]")
	fs.StringVar(&o.fio, "fio", "", "fio binary with the rbd engine (empty: librbd not measured)")
	fs.Int64Var(&o.nodeSize, "node-size", 64<<20, "size of the node images")
	fs.DurationVar(&o.profile, "profile", 0, "after the measured runs, profile each purerbd server (nbd.ko and ublk, behind Ceph and on a memory disk) and the rbd package alone this long per 4 KiB case of depth -profile-qd and print the profiles (0: none)")
	fs.IntVar(&o.profileQD, "profile-qd", 32, "the queue depth of the profiled cases: 1 or 32")
	fs.BoolVar(&o.pin, "pin", false, "pin the guest program to the first vCPU and every server to the second (an experiment on the emulator's TLB flushes)")
	fs.BoolVar(&o.pinServer, "pin-server", false, "pin only every server to the second vCPU, this program where the scheduler puts it (an experiment on what a server can do alone about the emulator's TLB flushes)")
	fs.BoolVar(&o.traceMM, "trace-mm", false, "trace each run's context switches and print, on "+PrefixMMTrace+" lines, how often a CPU changed address space (an experiment on the emulator's TLB flushes)")
	fs.BoolVar(&o.fioLoad, "fio-load", false, "run the block-device cases through fio's libaio engine (-fio) instead of this program's goroutines")
	fs.BoolVar(&o.runtimeSyscalls, "runtime-syscalls", false, "read and write the block devices through the Go runtime's system calls, a goroutine per request in flight, instead of raw calls at depth 1 and Linux AIO from one goroutine deeper (an experiment on this program's own runtime threads)")
	serverEnv := fs.String("server-env", "", "comma-separated KEY=VALUE added to the environment of the purerbd servers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.pin && o.pinServer {
		return errors.New("-pin and -pin-server: pin both apart, or only the servers")
	}
	if o.fioLoad && o.runtimeSyscalls {
		return errors.New("-fio-load and -runtime-syscalls: fio makes its own calls")
	}
	if o.fioLoad && o.fio == "" {
		return errors.New("-fio-load needs -fio")
	}
	if o.profileQD != 1 && o.profileQD != 32 {
		return fmt.Errorf("-profile-qd %d: the cases have depth 1 or 32", o.profileQD)
	}
	if *serverEnv != "" {
		o.serverEnv = strings.Split(*serverEnv, ",")
	}
	err := run(ctx, o)
	if err != nil {
		fmt.Printf("%sfail %v\n", PrefixResult, err)
		return err
	}
	fmt.Printf("%sok\n", PrefixResult)
	return nil
}

func run(ctx context.Context, o options) error {
	if o.pin {
		if err := pinProcess(os.Getpid(), guestCPU); err != nil {
			return err
		}
	}
	// crc32c first: ext4 mounts and libcrc32c (under rbd.ko) need a
	// crc32c driver, which nothing in the guest would load on demand
	if err := guestio.LoadModules("crc32c", "nbd", "ext4"); err != nil {
		return err
	}
	// the clocksource decides what a clock read costs a userspace
	// server: a vDSO read (tsc) or a system call (hpet, acpi_pm)
	if b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource"); err == nil {
		fmt.Printf("%s%s\n", PrefixClock, strings.TrimSpace(string(b)))
	}
	// what a system call costs the servers depends on the mitigations
	// the guest's kernel chose for the emulated CPU (page table
	// isolation above all); krbd crosses into userspace not at all
	if m := mitigations("/sys/devices/system/cpu/vulnerabilities"); m != "" {
		note("guest CPU mitigations: %s", m)
	}
	var errs []error
	ran := false
	// memory disks: purerbd nbd map --memory against nbdkit memory
	mem := group{name: "memory", span: o.span, opts: o}
	mem.contenders = append(mem.contenders, contender{name: "purerbd", open: func(ctx context.Context) (device, error) {
		return purerbdMapEnv(ctx, o.serverEnv, o.purerbd, "--memory", o.memSize)
	}})
	if o.nbdkit != "" {
		mem.contenders = append(mem.contenders, contender{name: "nbdkit", open: func(ctx context.Context) (device, error) {
			return nbdkitMemory(ctx, o.nbdkit, o.memSize)
		}})
	} else {
		note("memory: no nbdkit in the guest: purerbd alone")
	}
	if err := mem.run(ctx); err != nil {
		errs = append(errs, fmt.Errorf("memory: %w", err))
	} else {
		ran = true
	}
	if o.mon == "" {
		note("rbd and node plugin: the guest has no cluster")
		return firstOrNil(ran, errs)
	}
	key, err := readKey(o.keyring)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	imgs := strings.Split(o.images, ",")
	if len(imgs) >= 2 {
		rbdGroup := group{name: "rbd", span: o.span, opts: o}
		rbdGroup.contenders = []contender{
			{name: "purerbd", open: func(ctx context.Context) (device, error) {
				return purerbdMapEnv(ctx, o.serverEnv, o.purerbd, "-m", o.mon, "--id", o.user, "--keyring", o.keyring,
					o.pool+"/"+imgs[0])
			}},
			krbdContender(o, key, imgs[1]),
		}
		if err := rbdGroup.run(ctx); err != nil {
			errs = append(errs, fmt.Errorf("rbd: %w", err))
		} else {
			ran = true
		}
	}
	if len(imgs) == 3 {
		// the same against purerbd over ublk, where the kernel has it
		if err := guestio.LoadModules("ublk_drv"); err != nil {
			note("rbd-ublk: no ublk in this kernel (%v): not measured", err)
		} else {
			g := group{name: "rbd-ublk", span: o.span, opts: o}
			g.contenders = []contender{
				{name: "purerbd", open: func(ctx context.Context) (device, error) {
					return purerbdDeviceMap(ctx, o.purerbd, o.serverEnv, "-t", "ublk", "-m", o.mon, "--id", o.user, "--keyring", o.keyring,
						o.pool+"/"+imgs[2])
				}},
				krbdContender(o, key, imgs[1]),
			}
			if err := g.run(ctx); err != nil {
				errs = append(errs, fmt.Errorf("rbd-ublk: %w", err))
			} else {
				ran = true
			}
		}
	}
	if o.clientImages != "" && len(imgs) >= 2 {
		if err := clientGroup(o, key, imgs[1]).run(ctx); err != nil {
			errs = append(errs, fmt.Errorf("rbd-client: %w", err))
		} else {
			ran = true
		}
	}
	if len(imgs) >= 2 && o.nbdkit != "" {
		if err := floorGroup(o, key, imgs[1]).run(ctx); err != nil {
			errs = append(errs, fmt.Errorf("floor: %w", err))
		} else {
			ran = true
		}
	}
	if o.profile > 0 && len(imgs) >= 2 {
		profileServers(ctx, o, profileTargets(o, imgs), o.profile)
	}
	if o.nodeImages != "" {
		if err := nodePlugin(ctx, o, key); err != nil {
			errs = append(errs, fmt.Errorf("node plugin: %w", err))
		} else {
			ran = true
		}
	}
	return firstOrNil(ran, errs)
}

// firstOrNil reports the errors as notes when something ran, and fails
// when nothing did.
func firstOrNil(ran bool, errs []error) error {
	if !ran {
		return errors.Join(errs...)
	}
	for _, e := range errs {
		note("%v", e)
	}
	return nil
}

// readKey returns the key of a keyring file ("key = ..." line).
func readKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("keyring: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && strings.TrimSpace(k) == "key" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("keyring %s: no key", path)
}

// clientGroup is the rbd-client group (client.go): purerbd's rbd package
// in this process and, with fio, librbd, each on an image of its own,
// beside krbd on krbdImage.
func clientGroup(o options, key, krbdImage string) *group {
	imgs := strings.Split(o.clientImages, ",")
	g := &group{name: "rbd-client", span: o.span, opts: o}
	g.contenders = []contender{{name: "purerbd", open: func(ctx context.Context) (device, error) {
		return openPurerbdClient(ctx, o, imgs[0])
	}}}
	if o.fio != "" && len(imgs) >= 2 {
		g.contenders = append(g.contenders, contender{name: "librbd", open: func(ctx context.Context) (device, error) {
			return newLibrbdFio(o, imgs[1])
		}})
	} else {
		note("rbd-client: no fio or no image for librbd: librbd not measured")
	}
	g.contenders = append(g.contenders, krbdContender(o, key, krbdImage))
	return g
}

// floorGroup is the floor group: memory disks served from userspace,
// nbdkit's through nbd.ko and, where the kernel has ublk, purerbd's
// through ublk, beside krbd on krbdImage. A memory disk costs its server
// next to nothing, so its rate is the most a device served from
// userspace through that kernel path reaches in this guest, whatever
// the backend behind it.
func floorGroup(o options, key, krbdImage string) *group {
	g := &group{name: "floor", span: o.span, opts: o}
	g.contenders = []contender{{name: "nbdkit", open: func(ctx context.Context) (device, error) {
		return nbdkitMemory(ctx, o.nbdkit, o.memSize)
	}}}
	if err := guestio.LoadModules("ublk_drv"); err != nil {
		note("floor: no ublk in this kernel (%v): nbd.ko's floor only", err)
	} else {
		g.contenders = append(g.contenders, contender{name: "purerbd", open: func(ctx context.Context) (device, error) {
			return purerbdDeviceMap(ctx, o.purerbd, o.serverEnv, "-t", "ublk", "--memory", o.memSize)
		}})
	}
	g.contenders = append(g.contenders, krbdContender(o, key, krbdImage))
	return g
}

// krbdContender is krbd's device on image, the reference every RBD
// group measures beside its own contenders.
func krbdContender(o options, key, image string) contender {
	return contender{name: "krbd", open: func(ctx context.Context) (device, error) {
		return krbdMap(ctx, o.mon, o.user, key, o.pool, image)
	}}
}

// mitigations summarizes the kernel's vulnerabilities directory (dir):
// "NAME: STATE; ..." for the ones that cost a system call or a context
// switch, empty when there is no such directory.
func mitigations(dir string) string {
	var parts []string
	for _, n := range []string{"meltdown", "spectre_v2", "mds", "retbleed", "spec_rstack_overflow", "its"} {
		b, err := os.ReadFile(dir + "/" + n)
		if err != nil {
			continue
		}
		parts = append(parts, n+": "+strings.TrimSpace(string(b)))
	}
	return strings.Join(parts, "; ")
}
