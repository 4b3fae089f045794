package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/internal/maxprocs"
	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/kernel"
)

// `purerbd nbd map|unmap|list`: RBD images as /dev/nbdN through the
// kernel's nbd netlink interface, served by this process (what rbd-nbd
// does with librbd, here in pure Go). Needs CAP_SYS_ADMIN.

// defaultDeadConnTimeout is how long the kernel holds I/O for a server
// that died, waiting for a reattach (rbd-nbd's --reattach-timeout).
const defaultDeadConnTimeout = 30 * time.Second

// A mapped device has no request timeout by default: requests wait for
// the server however long the cluster takes, and those in flight when
// the server died are resent at the kernel's first look after --reattach
// replaced it (it looks at requests older than defaultResend, mostly at
// whole seconds: kernel.AttachConfig.ResendInterval), so a restart
// stalls I/O for the restart plus at most about a second. --timeout brings back the
// kernel's timeout, fixed, or adaptive with --min-timeout (see
// kernel.AttachConfig.MinTimeout).
const (
	defaultTimeout    = 0
	defaultMinTimeout = 0
	defaultResend     = 250 * time.Millisecond
)

// maxConns bounds --conns (the kernel takes one queue per connection).
const maxConns = 32

// mapFlags are `purerbd nbd map`'s options, checked.
type mapFlags struct {
	spec            imageSpec // the image, unless memory or file is set
	memory          int64
	file            string
	readOnly        bool
	exclusive       bool
	conns           int
	timeout         time.Duration
	minTimeout      time.Duration // 0: timeout is fixed
	resend          time.Duration // without a timeout (one connection)
	deadConnTimeout time.Duration
	cookie          string
	index           int
	reattach        bool
	releaseOnExit   bool
	encryption      encryptionFlags
	// rbd-nbd's: no trim, the cookie after the device, module
	// parameters, and where the line goes when this process went to the
	// background (daemonReady)
	noTrim     bool
	showCookie bool
	module     kernel.ModuleConfig
	ready      func(line string) error
}

// what names what is mapped, for messages.
func (m mapFlags) what() string {
	switch {
	case m.memory > 0:
		return "memory disk"
	case m.file != "":
		return m.file
	}
	return m.spec.String()
}

// mapOptions are map's options as given; check turns them into
// mapFlags.
type mapOptions struct {
	snap, cookie, device, memory, file string
	readOnly, exclusive                bool
	reattach, releaseOnExit            bool
	conns                              int
	timeout, minTimeout, resend, dead  float64
	encryption                         encryptionFlags
}

func newMapOptions() *mapOptions {
	return &mapOptions{conns: 1, dead: defaultDeadConnTimeout.Seconds(),
		timeout: defaultTimeout, minTimeout: defaultMinTimeout, resend: defaultResend.Seconds()}
}

func nbdMapCommand(g *globals) *cli.Command { return newMapOptions().command(g) }

// command is map with its options bound to o.
func (o *mapOptions) command(g *globals) *cli.Command {
	c := &cli.Command{
		Name:    "map",
		Summary: "attach an image (or a memory disk, or a file) to the kernel as /dev/nbdN and serve it",
		Args:    "[POOL/[NAMESPACE/]IMAGE[@SNAP]]",
		MaxArgs: 1,
		Value:   o,
		Help: `Attaches an RBD image (or a memory disk, or a file) to the kernel as
/dev/nbdN and serves it in the foreground (like rbd-nbd map, in this
process); it prints the device. Ctrl-C unmaps, unless --release-on-exit
leaves the device for a later --reattach. Needs CAP_SYS_ADMIN.`,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			m, err := o.check(inv.Args)
			if err != nil {
				return err
			}
			return mapDevice(ctx, g, m, inv.Stdout, inv.Stderr)
		},
	}
	c.String(&o.snap, "--snap SNAP", "map this snapshot (read-only)")
	c.Bool(&o.readOnly, "--read-only", "map read-only")
	c.Bool(&o.exclusive, "--exclusive", "keep the exclusive lock, refuse to hand it over")
	c.Int(&o.conns, "--conns N", "connections, one kernel queue each")
	c.Float64(&o.timeout, "--timeout SECS",
		"per-request timeout in seconds, the ceiling of the adaptive timeout (0: none; requests wait for the server, and after a "+
			"--reattach those in flight are resent every --resend-interval; with more than one connection the kernel's default, 30, fixed)")
	c.Float64(&o.resend, "--resend-interval SECS",
		"without --timeout, on one connection: the age from which the kernel looks at a request in flight; it looks mostly at whole seconds, and resends the requests a dead server held at its first look after a --reattach")
	c.Float64(&o.minTimeout, "--min-timeout SECS",
		"floor of the adaptive request timeout, where it starts; it doubles when a request outlives it, up to --timeout, "+
			"and comes back down once requests are fast (0, or --dead-conn-timeout 0: --timeout stays fixed)")
	c.Float64(&o.dead, "--dead-conn-timeout SECS",
		"seconds the kernel holds I/O waiting for a server that died to be replaced (--reattach)")
	c.String(&o.cookie, "--cookie C", "backend cookie naming the device (default: random)")
	c.String(&o.device, "--device /dev/nbdN", "use this device instead of a free one")
	c.Bool(&o.reattach, "--reattach", "take over the device carrying --cookie, whose server died")
	c.Bool(&o.releaseOnExit, "--release-on-exit", "on exit leave the device configured for a later --reattach instead of unmapping it")
	c.String(&o.memory, "--memory SIZE", "map a sparse in-memory disk of this size instead of an image (for trying the kernel path)")
	c.String(&o.file, "--file PATH", "map this file instead of an image")
	o.encryption.register(c)
	return c
}

// check reads map's options and positional arguments.
func (o *mapOptions) check(pos []string) (mapFlags, error) {
	var err error
	m := mapFlags{readOnly: o.readOnly, exclusive: o.exclusive, conns: o.conns, cookie: o.cookie,
		index: kernel.AnyIndex, reattach: o.reattach, releaseOnExit: o.releaseOnExit, file: o.file,
		encryption: o.encryption}
	if err := o.encryption.check(); err != nil {
		return m, err
	}
	switch {
	case o.memory != "" && o.file != "":
		return m, errors.New("give --memory or --file, not both")
	case o.memory != "" || o.file != "":
		if len(pos) != 0 || o.snap != "" || o.exclusive || o.encryption.given() {
			return m, errors.New("--memory and --file take no image, --snap, --exclusive or --encryption-format")
		}
		if o.memory != "" {
			if m.memory, err = cli.ParseSize(o.memory, 1); err != nil || m.memory == 0 {
				return m, fmt.Errorf("--memory %q: want a size such as 64M", o.memory)
			}
		}
	case len(pos) != 1:
		return m, errors.New("want exactly one POOL/IMAGE[@SNAP] (or --memory/--file)")
	default:
		if m.spec, err = parseImageArg(pos[0], o.snap); err != nil {
			return m, err
		}
		if m.spec.snap != "" {
			m.readOnly = true
		}
	}
	switch {
	case m.conns < 1 || m.conns > maxConns:
		return m, fmt.Errorf("--conns %d: want 1 to %d", m.conns, maxConns)
	case o.timeout < 0 || o.minTimeout < 0 || o.dead < 0 || o.resend < 0:
		return m, errors.New("timeouts cannot be negative")
	case m.reattach && m.cookie == "":
		return m, errors.New("--reattach needs --cookie")
	case m.reattach && o.device != "":
		return m, errors.New("--reattach finds the device by --cookie; drop --device")
	case m.exclusive && m.readOnly:
		return m, errors.New("--exclusive makes no sense read-only")
	}
	m.timeout = time.Duration(o.timeout * float64(time.Second))
	m.deadConnTimeout = time.Duration(o.dead * float64(time.Second))
	// Adapting needs a ceiling and a dead connection timeout (see
	// kernel.AttachConfig.MinTimeout).
	if m.timeout > 0 && m.deadConnTimeout > 0 {
		m.minTimeout = min(time.Duration(o.minTimeout*float64(time.Second)), m.timeout)
	}
	// Resending needs no timeout, one connection and a dead connection
	// timeout (see kernel.AttachConfig.ResendInterval).
	if m.timeout == 0 && m.conns == 1 && m.deadConnTimeout > 0 {
		m.resend = time.Duration(o.resend * float64(time.Second))
	}
	if o.device != "" {
		if m.index, err = deviceIndex(o.device); err != nil {
			return m, err
		}
	}
	if m.cookie == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		m.cookie = hex.EncodeToString(b[:])
	}
	return m, nil
}

// deviceIndex returns N of /dev/nbdN (or nbdN).
func deviceIndex(dev string) (int, error) {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(dev, "/dev/"), "nbd")
	n, err := strconv.Atoi(rest)
	if !ok || err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, fmt.Errorf("%q is not an nbd device (want /dev/nbdN)", dev)
	}
	return n, nil
}

// loadNBDModule loads nbd.ko with cfg's parameters unless it is there
// already (then the parameters are ignored, and said so, as rbd-nbd
// does).
func loadNBDModule(ctx context.Context, cfg kernel.ModuleConfig, stderr io.Writer) error {
	_, err := os.Stat("/proc/modules")
	cfg.IgnoreStatus = err != nil
	if cfg.NbdsMax != 0 || cfg.MaxPart != 0 {
		if _, err := os.Stat("/sys/module/nbd"); err == nil {
			fmt.Fprintln(stderr, "ignoring kernel module parameter options: nbd module already loaded")
		}
	}
	return kernel.LoadModule(ctx, cfg)
}

// mapDevice attaches an image and serves it until interrupted (then it
// unmaps, or releases with --release-on-exit) or until the device is
// unmapped by someone else.
func mapDevice(ctx context.Context, g *globals, m mapFlags, stdout, stderr io.Writer) error {
	var err error
	if err := loadNBDModule(ctx, m.module, stderr); err != nil {
		return err
	}
	log := g.logger(slog.LevelWarn)
	cfg := kernel.AttachConfig{
		Conns:           m.conns,
		Timeout:         m.timeout,
		MinTimeout:      m.minTimeout,
		ResendInterval:  m.resend,
		DeadConnTimeout: m.deadConnTimeout,
		Cookie:          m.cookie,
		ReadOnly:        m.readOnly,
		Index:           m.index,
		Server:          nbd.Config{Logger: log},
		Logger:          log,
	}
	// A reattach holds the device first: the kernel's resend of what the
	// dead server held runs while the image opens (kernel.HeldDevice).
	var held *kernel.HeldDevice
	if m.reattach {
		if held, err = kernel.Hold(ctx, cfg); err != nil {
			return fmt.Errorf("mapping %s: %w", m.what(), err)
		}
		defer held.Abandon() // unless served
	}
	what := m.what()
	switch {
	case m.memory > 0:
		if cfg.Backend, err = nbd.NewMemory(m.memory); err != nil {
			return err
		}
	case m.file != "":
		f, err := nbd.OpenFile(m.file, m.readOnly)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.Backend = f
	default:
		ie, err := openImageExport(ctx, g, m.spec.String(), imageExportOptions{readOnly: m.readOnly, exclusive: m.exclusive, encryption: m.encryption})
		if err != nil {
			return err
		}
		defer ie.close(stderr)
		cfg.Backend, what = ie.backend, ie.spec.String()
		cfg.ReadOnly = cfg.ReadOnly || ie.img.ReadOnly()
	}
	if m.noTrim {
		cfg.Backend = withoutTrim(cfg.Backend)
	}
	var dev *kernel.Device
	if held != nil {
		dev, err = held.Serve(ctx, cfg.Backend, cfg.Backend.Size(), cfg.ReadOnly)
	} else {
		dev, err = kernel.Attach(ctx, cfg)
	}
	if err != nil {
		return fmt.Errorf("mapping %s: %w", what, err)
	}
	// one stream of work per kernel connection (package maxprocs)
	go maxprocs.Run(ctx, maxprocs.Config{Demand: func() int { return m.conns }, Logger: log})
	line := dev.Path()
	if m.showCookie && dev.Cookie() != "" {
		line += " " + dev.Cookie()
	}
	if m.ready != nil {
		if err := m.ready(line); err != nil {
			log.Warn("reporting the device to the parent", "err", err)
		}
	} else {
		fmt.Fprintln(stdout, line)
	}
	select {
	case <-ctx.Done():
	case <-dev.Done():
		// unmapped elsewhere (purerbd nbd unmap): the server has ended
		return dev.Err()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if m.releaseOnExit && dev.Reattachable() {
		fmt.Fprintf(stderr, "purerbd nbd: releasing %s (cookie %s) for a later --reattach\n", dev.Path(), dev.Cookie())
		return dev.Release(sctx)
	}
	return dev.Detach(sctx)
}

func nbdUnmapCommand() *cli.Command {
	var cookie string
	c := &cli.Command{
		Name:    "unmap",
		Summary: "disconnect a device (its server then exits)",
		Args:    "[/dev/nbdN]",
		MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return unmapDevice(ctx, inv.Args, cookie)
		},
	}
	c.String(&cookie, "--cookie C", "unmap the device carrying this backend cookie")
	return c
}

// unmapDevice disconnects a device, by path or by cookie.
func unmapDevice(ctx context.Context, pos []string, cookie string) error {
	if (len(pos) == 1) == (cookie != "") {
		return errors.New("give one /dev/nbdN or --cookie C")
	}
	var err error
	index := -1
	if len(pos) == 1 {
		if index, err = deviceIndex(pos[0]); err != nil {
			return err
		}
	}
	c, err := kernel.Open(ctx, kernel.ClientConfig{})
	if kernel.IoctlOnly(err, "") {
		// No netlink family here (a kernel before 4.12, or before 6.4
		// outside the initial network namespace): devices attached from
		// here went through ioctls, and have no cookies.
		if cookie != "" {
			return fmt.Errorf("%s: devices attached without it carry no cookie; give /dev/nbdN",
				kernel.MissingFamilyCause(kernel.CurrentNetns("")))
		}
		return kernel.DisconnectIoctl(index)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	if cookie != "" {
		if index, err = c.FindByCookie(cookie); err != nil {
			return err
		}
	}
	st, ok, err := c.DeviceStatus(ctx, index)
	if err != nil {
		return err
	}
	if !ok || !st.Connected {
		return fmt.Errorf("/dev/nbd%d is not mapped", index)
	}
	return c.Disconnect(ctx, index)
}

// mappedDevice is one line of `purerbd nbd list`.
type mappedDevice struct {
	Device string `json:"device"`
	Cookie string `json:"cookie"`
	Size   int64  `json:"size"`
	Conns  int    `json:"connections"`
}

func nbdListCommand() *cli.Command {
	format := "plain"
	c := &cli.Command{
		Name:    "list",
		Aliases: []string{"list-mapped"},
		Summary: "list the connected nbd devices with their cookies",
		Run: func(_ context.Context, inv *cli.Invocation) error {
			return listDevices(inv.Stdout, format)
		},
	}
	c.Choice(&format, "--format FORMAT", []string{"plain", "json"}, "output format")
	return c
}

// listDevices lists the nbd devices the kernel runs (through netlink or
// ioctls).
func listDevices(stdout io.Writer, format string) error {
	devs, err := kernel.List("")
	if err != nil {
		return err
	}
	var list []mappedDevice
	for _, d := range devs {
		list = append(list, mappedDevice{Device: d.Path(), Cookie: d.Cookie, Size: d.Size, Conns: d.Connections})
	}
	return printMapped(stdout, list, format)
}

// printMapped writes the list as a table or as JSON.
func printMapped(w io.Writer, list []mappedDevice, format string) error {
	if format == "json" {
		if list == nil {
			list = []mappedDevice{}
		}
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(list)
	}
	if len(list) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "device\tsize\tconns\tcookie")
	for _, d := range list {
		cookie := d.Cookie
		if cookie == "" {
			cookie = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", d.Device, humanBytes(uint64(d.Size)), d.Conns, cookie)
	}
	return tw.Flush()
}
