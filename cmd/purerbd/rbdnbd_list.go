package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/nbd/kernel"
)

// The servers of mapped nbd devices, found as rbd-nbd finds them: the
// kernel's /sys/block/nbdN/pid names the task that started the device,
// whose command line (/proc/PID/cmdline) says what it maps. A device
// taken over by attach still names its first server; then the server is
// the attach process naming the device in its --device.

// nbdServer is a process serving an nbd device.
type nbdServer struct {
	pid    int
	spec   imageSpec
	device string
	cookie string
	attach bool
}

// nbdServerJSON is one device of rbd-nbd's list-mapped --format json.
type nbdServerJSON struct {
	ID        int    `json:"id"`
	Pool      string `json:"pool"`
	Namespace string `json:"namespace"`
	Image     string `json:"image"`
	Snap      string `json:"snap"`
	Device    string `json:"device"`
	Cookie    string `json:"cookie"`
}

func (s nbdServer) json() nbdServerJSON {
	return nbdServerJSON{ID: s.pid, Pool: s.spec.pool, Namespace: s.spec.ns, Image: s.spec.name,
		Snap: s.spec.snap, Device: s.device, Cookie: s.cookie}
}

// procRoot is where /proc is mounted.
const procRoot = "/proc"

// nbdServers lists the mapped devices whose server is found, in device
// order.
func nbdServers() ([]nbdServer, error) {
	devs, err := kernel.List("")
	if err != nil {
		return nil, err
	}
	var out []nbdServer
	for _, d := range devs {
		if s, ok := findServer(d); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// findServer finds d's server: the process the kernel names, or else an
// attach naming d.
func findServer(d kernel.Mapped) (nbdServer, bool) {
	if d.PID > 0 {
		if s, ok := serverOf(d.PID, d.Path()); ok {
			s.cookie = d.Cookie
			return s, true
		}
	}
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nbdServer{}, false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if s, ok := serverOf(pid, d.Path()); ok && s.attach {
			s.cookie = d.Cookie
			return s, true
		}
	}
	return nbdServer{}, false
}

// serverOf reads the command line of process (or thread) pid and
// returns what it serves on dev, if it is a map or attach of an image
// by purerbd or rbd-nbd.
func serverOf(pid int, dev string) (nbdServer, bool) {
	raw, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cmdline"))
	if err != nil || len(raw) == 0 {
		return nbdServer{}, false
	}
	argv := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	s, ok := parseServerArgs(argv, dev)
	if !ok {
		return s, false
	}
	s.pid = tgidOf(pid)
	return s, true
}

// parseServerArgs reads a map or attach command line (argv[0] first) as
// this program would run it; dev is the device the kernel says the
// process started, which a command line naming another device is not
// serving.
func parseServerArgs(argv []string, dev string) (nbdServer, bool) {
	if len(argv) < 2 {
		return nbdServer{}, false
	}
	name := filepath.Base(argv[0])
	if name != "rbd-nbd" && name != "rbd" && !strings.HasPrefix(name, "purerbd") {
		return nbdServer{}, false
	}
	inv, err := cli.Parse(newRoot(), multiCallArgs(argv[0], argv[1:]))
	if err != nil || inv.Help || len(inv.Args) != 1 {
		return nbdServer{}, false
	}
	s := nbdServer{device: dev}
	var device, snap string
	switch o := inv.Command.Value.(type) {
	case *rbdNBDOptions:
		device, s.attach = o.device, inv.Command.Name == "attach"
	case *rbdDeviceOptions:
		if o.typ != deviceNBD {
			return nbdServer{}, false
		}
		device, s.attach = o.nbd.device, inv.Command.Name == "attach"
		sp, err := o.rbd.parseSpec(inv.Args[0], false)
		if err != nil {
			return nbdServer{}, false
		}
		if (device != "" && device != dev) || (s.attach && device == "") {
			return nbdServer{}, false
		}
		s.spec = sp
		return s, true
	case *mapOptions:
		if o.memory != "" || o.file != "" {
			return nbdServer{}, false
		}
		device, snap = o.device, o.snap
	default:
		return nbdServer{}, false
	}
	if device != "" && device != dev {
		return nbdServer{}, false
	}
	if s.attach && device == "" {
		return nbdServer{}, false
	}
	s.spec, err = parseImageArg(inv.Args[0], snap)
	return s, err == nil
}

// tgidOf is the process of thread id (the kernel's pid attribute names
// the thread that started the device).
func tgidOf(tid int) int {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(tid), "status"))
	if err != nil {
		return tid
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("Tgid:")); ok {
			if n, err := strconv.Atoi(string(bytes.TrimSpace(v))); err == nil && n > 0 {
				return n
			}
		}
	}
	return tid
}

// alive reports whether the server's process still runs (a zombie has
// ended).
func (s nbdServer) alive() bool {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(s.pid), "stat"))
	if err != nil {
		return false
	}
	// the state follows the command name, which is in parentheses
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

// terminate asks the server to end (rbd-nbd's detach: SIGTERM).
func (s nbdServer) terminate() error {
	if err := unix.Kill(s.pid, unix.SIGTERM); err != nil {
		return fmt.Errorf("failed to terminate %d: %w", s.pid, err)
	}
	return nil
}

// waitExit waits up to timeout for the server to exit.
func (s nbdServer) waitExit(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for s.alive() {
		if time.Now().After(deadline) {
			return errors.New("waiting for process exit timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(rbdNBDUnmapPollInterval):
		}
	}
	return nil
}
