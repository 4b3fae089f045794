// Package netns gives a test a network namespace of its own: a bridge
// holding the host address 10.77.N.1/24 and tap devices for VMs, nothing
// routed to the root namespace, and a blackhole route for 10.77.N.0/24 in
// the root namespace while it exists, so that a client started outside
// the namespace by mistake fails at once instead of sending the test's
// traffic off the machine (recipes/vm-net/netns.sh is the hand-tested
// original).
//
// Everything that talks to addresses in the namespace must run inside it:
// Ceph daemons, their command-line tools and qemu are started with
// `ip netns exec NAME` (Command). A Go test process cannot enter a
// namespace itself: setns(2) applies to one thread of its runtime.
//
// N is leased with a lock file under the temp directory, so test
// packages running at the same time get different subnets. Creating a
// namespace needs root and iproute2's ip.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// Options shape a namespace.
type Options struct {
	// Taps is the number of tap devices (tap0, tap1, ...) on the bridge,
	// one per VM; default 1.
	Taps int
}

// Namespace is a network namespace created by Create.
type Namespace struct {
	Name   string   // "purerbd-<pid>-<N>"
	Subnet string   // "10.77.N.0/24"; blackholed in the root namespace
	HostIP string   // "10.77.N.1", on the bridge inside the namespace
	Bridge string   // "br0"
	Taps   []string // "tap0", ...: bridge ports qemu opens by name inside the namespace
	octet  int
	ip     string
	lock   *os.File
}

// Debian package that provides ip.
const pkgIPRoute = "iproute2"

// Create makes a namespace with a bridge and taps and the blackhole
// route for its subnet. Close removes all of it.
func Create(ctx context.Context, opts Options) (_ *Namespace, err error) {
	if opts.Taps <= 0 {
		opts.Taps = 1
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return nil, fmt.Errorf("netns: no ip command: install the Debian package %s: %w", pkgIPRoute, err)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("netns: creating a network namespace needs root")
	}
	n := &Namespace{ip: ip, Bridge: "br0"}
	if err := n.lease(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()
	// The guard first: from here on, nothing for the subnet leaves the
	// root namespace. "add" (not "replace") fails if a route exists.
	if err := n.run(ctx, "route", "add", "blackhole", n.Subnet); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"netns", "add", n.Name},
		{"-n", n.Name, "link", "set", "lo", "up"},
		// stp_state 0, forward_delay 0: a new port forwards at once
		{"-n", n.Name, "link", "add", n.Bridge, "type", "bridge", "stp_state", "0", "forward_delay", "0"},
		{"-n", n.Name, "addr", "add", n.HostIP + "/24", "dev", n.Bridge},
		{"-n", n.Name, "link", "set", n.Bridge, "up"},
	}
	for i := 0; i < opts.Taps; i++ {
		t := "tap" + strconv.Itoa(i)
		n.Taps = append(n.Taps, t)
		// a persistent tap made inside the namespace (TUNSETIFF acts in
		// the caller's namespace): qemu opens it by name from in there
		steps = append(steps,
			[]string{"-n", n.Name, "tuntap", "add", "dev", t, "mode", "tap"},
			[]string{"-n", n.Name, "link", "set", t, "master", n.Bridge},
			[]string{"-n", n.Name, "link", "set", t, "up"})
	}
	for _, s := range steps {
		if err := n.run(ctx, s...); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// New is Create for a test: it fails tb on error and closes the
// namespace in tb's cleanup. Under -short it skips tb (see
// internal/shorttier).
func New(tb testing.TB, opts Options) *Namespace {
	tb.Helper()
	shorttier.Skip(tb, "root and a network namespace")
	n, err := Create(context.Background(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := n.Close(); err != nil {
			tb.Error(err)
		}
	})
	return n
}

// lease picks a free N: its lock file is ours, no namespace of that name
// exists and the root namespace has no route for the subnet.
func (n *Namespace) lease(ctx context.Context) error {
	dir := filepath.Join(os.TempDir(), "purerbd-netns")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return fmt.Errorf("netns: lock dir: %w", err)
	}
	start := os.Getpid() % 250
	for i := 0; i < 250; i++ {
		octet := 1 + (start+i)%250
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(octet)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		subnet := fmt.Sprintf("10.77.%d.0/24", octet)
		out, err := n.output(ctx, "route", "show", "root", subnet)
		if err != nil || len(bytes.TrimSpace(out)) != 0 {
			f.Close()
			continue
		}
		n.octet, n.lock, n.Subnet = octet, f, subnet
		n.HostIP = fmt.Sprintf("10.77.%d.1", octet)
		n.Name = fmt.Sprintf("purerbd-%d-%d", os.Getpid(), octet)
		return nil
	}
	return errors.New("netns: no free subnet in 10.77.1-250.0/24")
}

// GuestIP returns the address of guest i (10.77.N.10+i); GuestCIDR the
// same with its prefix length.
func (n *Namespace) GuestIP(i int) string { return fmt.Sprintf("10.77.%d.%d", n.octet, 10+i) }

// GuestCIDR returns GuestIP(i) + "/24".
func (n *Namespace) GuestCIDR(i int) string { return n.GuestIP(i) + "/24" }

// ExecPrefix is the command line that runs a program inside the
// namespace: append the program and its arguments.
func (n *Namespace) ExecPrefix() []string { return []string{n.ip, "netns", "exec", n.Name} }

// Command returns a command that runs name inside the namespace. `ip
// netns exec` enters it and execs name: the process's PID is name's.
func (n *Namespace) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	p := n.ExecPrefix()
	return exec.CommandContext(ctx, p[0], append(append(p[1:], name), args...)...)
}

// PIDs returns the processes inside the namespace.
func (n *Namespace) PIDs(ctx context.Context) ([]int, error) {
	out, err := n.output(ctx, "netns", "pids", n.Name)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// Close deletes the namespace (its bridge and taps go with it) and the
// blackhole route. Every process in the namespace must have ended: it
// kills none, waits up to 10 s for them, and keeps the namespace and
// the route when some remain.
func (n *Namespace) Close() error {
	if n.lock == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	if n.exists() {
		var pids []int
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			pids, _ = n.PIDs(ctx)
			if len(pids) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(pids) > 0 {
			return fmt.Errorf("netns: %s still has processes %v: namespace and blackhole route %s kept", n.Name, pids, n.Subnet)
		}
		if err := n.run(ctx, "netns", "del", n.Name); err != nil {
			errs = append(errs, err)
		}
	}
	if out, _ := n.output(ctx, "route", "show", "root", n.Subnet); len(bytes.TrimSpace(out)) != 0 {
		if err := n.run(ctx, "route", "del", "blackhole", n.Subnet); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		n.lock.Close()
		n.lock = nil
	}
	return errors.Join(errs...)
}

func (n *Namespace) exists() bool {
	_, err := os.Stat(filepath.Join("/run/netns", n.Name))
	return err == nil
}

func (n *Namespace) run(ctx context.Context, args ...string) error {
	_, err := n.output(ctx, args...)
	return err
}

func (n *Namespace) output(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, n.ip, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("netns: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
