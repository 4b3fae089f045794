package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/kernel"
)

// `purerbd rbd-nbd` (and a purerbd binary reached as rbd-nbd): Ceph's
// rbd-nbd command line, verbs map, attach, unmap, detach and list-mapped
// with its options, served by this process's NBD server. As rbd-nbd,
// map prints the device and goes to the background (-f keeps it in the
// foreground); SIGTERM or SIGINT ends the server and leaves the device
// to the kernel for a later attach (the kernel holds its I/O for
// --reattach-timeout), unmap disconnects the device and waits for its
// server to exit, detach ends the server only. list-mapped finds each
// device's server as rbd-nbd does (/sys/block/nbdN/pid, then the
// process's command line), so it lists the devices of Ceph's rbd-nbd too,
// and Ceph's rbd-nbd lists those of a purerbd reached as rbd-nbd.

// rbdNBDOptions are rbd-nbd's options as given (and, read back from a
// server's command line, what it mapped).
type rbdNBDOptions struct {
	device, cookie            string
	ioTimeout, reattach       int
	nbdsMax, maxPart          int
	readOnly, exclusive       bool
	notrim, quiesce           bool
	showCookie, foreground    bool
	quiesceHook               string
	encFormats, encPassphrase []string
	format                    string
	pretty                    bool
}

// rbd-nbd's defaults: the kernel's request timeout (-1: not set) and 30 s
// for a new server to attach after the old one died.
const (
	rbdNBDNoIOTimeout       = -1
	rbdNBDReattachTimeout   = 30
	rbdNBDDefaultMaxPart    = 0
	rbdNBDMaxPartLimit      = 255
	rbdNBDUnmapPollInterval = 100 * time.Millisecond
)

func newRBDNBDOptions() *rbdNBDOptions {
	return &rbdNBDOptions{ioTimeout: rbdNBDNoIOTimeout, reattach: rbdNBDReattachTimeout,
		maxPart: rbdNBDDefaultMaxPart, format: "plain"}
}

// rbdNBDCommand is the rbd-nbd group: its options apply to every verb,
// anywhere on the line, as rbd-nbd takes them.
func rbdNBDCommand(g *globals) *cli.Command {
	o := newRBDNBDOptions()
	group := &cli.Command{
		Name:    "rbd-nbd",
		Summary: "Ceph's rbd-nbd: map, attach, unmap, detach, list-mapped",
		Help: `Maps RBD images to /dev/nbdN as Ceph's rbd-nbd does, with its verbs and
options; a purerbd binary reached as rbd-nbd runs these. map prints the
device and runs its server in the background (-f: in the foreground).
SIGTERM ends a server and leaves its device to the kernel for
--reattach-timeout seconds, for attach; unmap disconnects. Needs
CAP_SYS_ADMIN. Exits 1 on any error, as rbd-nbd does.`,
		UsageStatus: func(cli.ErrorKind) int { return 1 },
	}
	o.register(group)
	return group.Add(
		o.mapCommand(g, "map", "map an image to an nbd device (prints the device)", false),
		o.mapCommand(g, "attach", "attach an image to the nbd device its dead server left (--device, --cookie)", true),
		o.unmapCommand("unmap", "disconnect a device (by path or image), then wait for its server to exit"),
		o.unmapCommand("detach", "end the server of a device (by path or image), leaving the device for attach"),
		o.listCommand(),
	)
}

// register declares rbd-nbd's options on cmd.
func (o *rbdNBDOptions) register(cmd *cli.Command) {
	cmd.String(&o.device, "--device DEV", "nbd device path (/dev/nbdN)")
	cmd.Bool(&o.readOnly, "--read-only", "map read-only")
	cmd.Bool(&o.exclusive, "--exclusive", "forbid writes by other clients")
	cmd.Bool(&o.notrim, "--notrim", "turn off trim/discard")
	cmd.Int(&o.ioTimeout, "--io-timeout, --timeout SEC", "kernel request timeout in seconds (-1: none, requests wait for the server and are resent after an attach)")
	cmd.Int(&o.reattach, "--reattach-timeout SEC", "how long the kernel holds I/O for a new server after one died; how long unmap and detach wait for the server to exit")
	cmd.Int(&o.nbdsMax, "--nbds_max N", "module parameter nbds_max, when this loads nbd")
	cmd.Int(&o.maxPart, "--max_part N", "module parameter max_part (0 to 255), when this loads nbd")
	cmd.Bool(&o.quiesce, "--quiesce", "use quiesce callbacks (not supported: refused)")
	cmd.String(&o.quiesceHook, "--quiesce-hook PATH", "quiesce hook (not supported: refused)")
	cmd.Bool(new(bool), "--try-netlink", "accepted: netlink is used whenever the kernel has it")
	cmd.Bool(&o.showCookie, "--show-cookie", "map prints the device's cookie after it")
	cmd.String(&o.cookie, "--cookie C", "the device's cookie (map: default random; attach: the one the device carries)")
	cmd.Strings(&o.encFormats, "--encryption-format FORMAT", "serve the plaintext of a LUKS-encrypted image: luks1, luks2 or luks (either); repeated for a clone's ancestors, the image's first")
	cmd.Strings(&o.encPassphrase, "--encryption-passphrase-file FILE", "the passphrase, the file's whole content; repeated, one for each --encryption-format (alone: luks)")
	cmd.Bool(&o.foreground, "-f, --foreground, -d", "map and attach stay in the foreground")
	cmd.String(&o.format, "--format FORMAT", "list-mapped: plain or json")
	cmd.Bool(&o.pretty, "--pretty-format", "list-mapped: indented json")
}

// check refuses what purerbd cannot do, as rbd-nbd's parser refuses
// bad values.
func (o *rbdNBDOptions) check() error {
	switch {
	case o.ioTimeout < rbdNBDNoIOTimeout:
		return errors.New("invalid argument for io-timeout")
	case o.reattach < 0:
		return errors.New("invalid argument for reattach-timeout")
	case o.nbdsMax < 0:
		return errors.New("invalid argument for nbds_max")
	case o.maxPart < 0 || o.maxPart > rbdNBDMaxPartLimit:
		return errors.New("invalid argument for max_part(0~255)")
	case o.quiesce || o.quiesceHook != "":
		return errors.New("--quiesce is not supported: purerbd runs no quiesce hooks (freeze the filesystem before `rbd snap create` instead)")
	}
	enc := o.encryption()
	return enc.check()
}

// encryption is rbd-nbd's repeated encryption options, in its order.
func (o *rbdNBDOptions) encryption() encryptionFlags {
	return encryptionFlags{formats: o.encFormats, passphraseFiles: o.encPassphrase}
}

// mapFlags turns rbd-nbd's options for spec into nbd map's.
func (o *rbdNBDOptions) mapFlags(spec string, attach bool) (mapFlags, error) {
	if err := o.check(); err != nil {
		return mapFlags{}, err
	}
	mo := newMapOptions()
	mo.readOnly, mo.exclusive, mo.cookie = o.readOnly, o.exclusive, o.cookie
	mo.dead = float64(o.reattach)
	if o.ioTimeout >= 0 {
		mo.timeout = float64(o.ioTimeout)
	}
	if !attach {
		mo.device = o.device
	}
	mo.reattach = attach
	mo.encryption = o.encryption()
	// rbd-nbd leaves the device to the kernel when its server ends
	// (SIGTERM), for attach; unmap is what disconnects it
	mo.releaseOnExit = true
	m, err := mo.check([]string{spec})
	if err != nil {
		return m, err
	}
	m.noTrim, m.showCookie = o.notrim, o.showCookie
	m.module = kernel.ModuleConfig{NbdsMax: o.nbdsMax, MaxPart: o.maxPart}
	return m, nil
}

// mapCommand is map, or attach (a server for the device a dead one left).
func (o *rbdNBDOptions) mapCommand(g *globals, name, summary string, attach bool) *cli.Command {
	return &cli.Command{
		Name:    name,
		Summary: summary,
		Args:    "IMAGE-OR-SNAP-SPEC",
		MinArgs: 1,
		MaxArgs: 1,
		Value:   o,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return o.runMap(ctx, g, inv, inv.Args[0], attach)
		},
	}
}

// runMap maps (or attaches) spec: in the background unless told
// otherwise, printing the device once the kernel has it.
func (o *rbdNBDOptions) runMap(ctx context.Context, g *globals, inv *cli.Invocation, spec string, attach bool) error {
	m, err := o.mapFlags(spec, attach)
	if err != nil {
		return err
	}
	ready, err := daemonReady()
	if err != nil {
		return err
	}
	// in the background the parent checked (and the child would find
	// the parent's attach as the device's server)
	if attach && ready == nil {
		if err := o.checkAttach(); err != nil {
			return err
		}
	}
	if ready == nil && !o.foreground {
		return startDaemon(ctx, inv.Stdout, inv.Stderr)
	}
	m.ready = ready
	return mapDevice(ctx, g, m, inv.Stdout, inv.Stderr)
}

// checkAttach does rbd-nbd's checks of attach: a device, the cookie it
// carries, and no live server on it.
func (o *rbdNBDOptions) checkAttach() error {
	if o.device == "" {
		return errors.New("must specify device to attach")
	}
	index, err := deviceIndex(o.device)
	if err != nil {
		return err
	}
	devs, err := kernel.List("")
	if err != nil {
		return err
	}
	for _, d := range devs {
		if d.Index != index {
			continue
		}
		switch {
		case d.Cookie == "":
			return fmt.Errorf("%s carries no cookie (a kernel before 5.14, or attached through ioctls): purerbd attaches by cookie", o.device)
		case o.cookie == "":
			return errors.New("must specify cookie to attach")
		case d.Cookie != o.cookie:
			return errors.New("cookie mismatch")
		}
		if p, ok := findServer(d); ok && p.alive() {
			return fmt.Errorf("%s has process %d connected", o.device, p.pid)
		}
		return nil
	}
	return fmt.Errorf("%s is not mapped", o.device)
}

// unmapCommand is unmap (disconnect, then wait for the server to exit)
// or detach (end the server only).
func (o *rbdNBDOptions) unmapCommand(name, summary string) *cli.Command {
	return &cli.Command{
		Name:    name,
		Summary: summary,
		Args:    "DEVICE-OR-IMAGE-SPEC",
		MinArgs: 1,
		MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return o.unmap(ctx, inv.Args[0], name == "detach", func(s string) (imageSpec, error) { return parseImageArg(s, "") })
		},
	}
}

// unmap finds arg's device and server, then disconnects the device and
// waits for the server (or, detach, signals the server and waits); an
// image spec is read by parse.
func (o *rbdNBDOptions) unmap(ctx context.Context, arg string, detach bool, parse func(string) (imageSpec, error)) error {
	if err := o.check(); err != nil {
		return err
	}
	var target nbdServer
	found := false
	if strings.HasPrefix(arg, "/dev/") {
		if _, err := deviceIndex(arg); err != nil {
			return fmt.Errorf("invalid device path: %s (expected /dev/nbd{num})", arg)
		}
		target.device = arg
		servers, err := nbdServers()
		if err != nil {
			return err
		}
		for _, s := range servers {
			if s.device == arg {
				target, found = s, true
				break
			}
		}
		if !found && detach {
			return fmt.Errorf("no process attached to %s found", arg)
		}
	} else {
		spec, err := parse(arg)
		if err != nil {
			return err
		}
		servers, err := nbdServers()
		if err != nil {
			return err
		}
		for _, s := range servers {
			if s.spec == spec && (o.device == "" || s.device == o.device) {
				target, found = s, true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s is not mapped", spec)
		}
	}
	if detach {
		if err := target.terminate(); err != nil {
			return err
		}
	} else if err := unmapDevice(ctx, []string{target.device}, ""); err != nil {
		return err
	}
	if !found {
		return nil
	}
	return target.waitExit(ctx, time.Duration(o.reattach)*time.Second)
}

func (o *rbdNBDOptions) listCommand() *cli.Command {
	return &cli.Command{
		Name:    "list-mapped",
		Summary: "list the mapped nbd devices with their images and servers",
		Run:     func(_ context.Context, inv *cli.Invocation) error { return o.list(inv.Stdout) },
	}
}

// list prints the mapped devices (list-mapped).
func (o *rbdNBDOptions) list(w io.Writer) error {
	if err := o.check(); err != nil {
		return err
	}
	servers, err := nbdServers()
	if err != nil {
		return err
	}
	return printNBDServers(w, servers, o.format, o.pretty)
}

// printNBDServers writes list-mapped's table or JSON as rbd-nbd does.
func printNBDServers(w io.Writer, servers []nbdServer, format string, pretty bool) error {
	switch format {
	case "json":
		list := make([]nbdServerJSON, 0, len(servers))
		for _, s := range servers {
			list = append(list, s.json())
		}
		return writeRBDNBDJSON(w, list, pretty)
	case "", "plain":
		if len(servers) == 0 {
			return nil
		}
		t := &textTable{headers: []string{"id", "pool", "namespace", "image", "snap", "device", "cookie"}, right: make([]bool, 7)}
		for _, s := range servers {
			j := s.json()
			snap := j.Snap
			if snap == "" {
				snap = "-"
			}
			t.add(strconv.Itoa(j.ID), j.Pool, j.Namespace, j.Image, snap, j.Device, j.Cookie)
		}
		return t.write(w)
	case "xml":
		return errors.New("--format xml is not supported (json or plain)")
	}
	return fmt.Errorf("invalid output format: %s", format)
}

// writeRBDNBDJSON writes v as rbd-nbd's formatter flushes it: without a
// line break after it, unless pretty.
func writeRBDNBDJSON(w io.Writer, v any, pretty bool) error {
	var b bytes.Buffer
	if err := (&outputFormat{format: "json", pretty: pretty}).writeJSON(&b, v); err != nil {
		return err
	}
	out := b.Bytes()
	if !pretty {
		out = bytes.TrimSuffix(out, []byte("\n"))
	}
	_, err := w.Write(out)
	return err
}

// withoutTrim hides b's Trimmer and Zeroer (rbd-nbd's --notrim: the
// kernel is told the device cannot discard), keeping its flushes.
func withoutTrim(b nbd.Backend) nbd.Backend {
	if f, ok := b.(nbd.Flusher); ok {
		return noTrimFlusher{b, f}
	}
	return noTrim{b}
}

type noTrim struct{ nbd.Backend }

type noTrimFlusher struct {
	nbd.Backend
	nbd.Flusher
}
