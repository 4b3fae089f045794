package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

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
	deadConnTimeout time.Duration
	cookie          string
	index           int
	reattach        bool
	releaseOnExit   bool
}

// parseMapArgs reads map's arguments (client options already taken out).
func parseMapArgs(args []string, stderr io.Writer) (mapFlags, error) {
	fs := flag.NewFlagSet("nbd map", flag.ContinueOnError)
	fs.SetOutput(stderr)
	snap := fs.String("snap", "", "map this snapshot (read-only)")
	readOnly := fs.Bool("read-only", false, "map read-only")
	exclusive := fs.Bool("exclusive", false, "keep the exclusive lock, refuse to hand it over")
	conns := fs.Int("conns", 1, "connections, one kernel queue each")
	timeout := fs.Float64("timeout", 0, "per-request timeout in seconds (0: the kernel's default)")
	dead := fs.Float64("dead-conn-timeout", defaultDeadConnTimeout.Seconds(),
		"seconds the kernel holds I/O waiting for a server that died to be replaced (--reattach)")
	cookie := fs.String("cookie", "", "backend cookie naming the device (default: random)")
	device := fs.String("device", "", "use this device (/dev/nbdN) instead of a free one")
	reattach := fs.Bool("reattach", false, "take over the device carrying --cookie, whose server died")
	release := fs.Bool("release-on-exit", false, "on exit leave the device configured for a later --reattach instead of unmapping it")
	memory := fs.String("memory", "", "map a sparse in-memory disk of this size instead of an image (for trying the kernel path)")
	file := fs.String("file", "", "map this file instead of an image")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return mapFlags{}, err
	}
	m := mapFlags{readOnly: *readOnly, exclusive: *exclusive, conns: *conns, cookie: *cookie,
		index: kernel.AnyIndex, reattach: *reattach, releaseOnExit: *release, file: *file}
	switch {
	case *memory != "" && *file != "":
		return m, errors.New("give --memory or --file, not both")
	case *memory != "" || *file != "":
		if len(pos) != 0 || *snap != "" || *exclusive {
			return m, errors.New("--memory and --file take no image, --snap or --exclusive")
		}
		if *memory != "" {
			if m.memory, err = rbdSize(*memory, 1); err != nil || m.memory == 0 {
				return m, fmt.Errorf("--memory %q: want a size such as 64M", *memory)
			}
		}
	case len(pos) != 1:
		return m, errors.New("want exactly one POOL/IMAGE[@SNAP] (or --memory/--file)")
	default:
		if m.spec, err = parseImageArg(pos[0], *snap); err != nil {
			return m, err
		}
		if m.spec.snap != "" {
			m.readOnly = true
		}
	}
	switch {
	case m.conns < 1 || m.conns > maxConns:
		return m, fmt.Errorf("--conns %d: want 1 to %d", m.conns, maxConns)
	case *timeout < 0 || *dead < 0:
		return m, errors.New("timeouts cannot be negative")
	case m.reattach && m.cookie == "":
		return m, errors.New("--reattach needs --cookie")
	case m.reattach && *device != "":
		return m, errors.New("--reattach finds the device by --cookie; drop --device")
	case m.exclusive && m.readOnly:
		return m, errors.New("--exclusive makes no sense read-only")
	}
	m.timeout = time.Duration(*timeout * float64(time.Second))
	m.deadConnTimeout = time.Duration(*dead * float64(time.Second))
	if *device != "" {
		if m.index, err = deviceIndex(*device); err != nil {
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

// loadNBDModule loads nbd.ko unless it is there already.
func loadNBDModule(ctx context.Context) error {
	_, err := os.Stat("/proc/modules")
	return kernel.LoadModule(ctx, kernel.ModuleConfig{IgnoreStatus: err != nil})
}

// runNBDMap attaches an image and serves it until interrupted (then it
// unmaps, or releases with --release-on-exit) or until the device is
// unmapped by someone else.
func runNBDMap(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	g, rest, err := parseGlobalFlags(args)
	if err != nil {
		return err
	}
	m, err := parseMapArgs(rest, stderr)
	if err != nil {
		return err
	}
	if err := loadNBDModule(ctx); err != nil {
		return err
	}
	var (
		backend  nbd.Backend
		readOnly = m.readOnly
		what     string
	)
	switch {
	case m.memory > 0:
		if backend, err = nbd.NewMemory(m.memory); err != nil {
			return err
		}
		what = "memory disk"
	case m.file != "":
		f, err := nbd.OpenFile(m.file, m.readOnly)
		if err != nil {
			return err
		}
		defer f.Close()
		backend, what = f, m.file
	default:
		ie, err := openImageExport(ctx, g, m.spec.String(), imageExportOptions{readOnly: m.readOnly, exclusive: m.exclusive}, stderr)
		if err != nil {
			return err
		}
		defer ie.close(stderr)
		backend, what = ie.backend, ie.spec.String()
		readOnly = readOnly || ie.img.ReadOnly()
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := kernel.AttachConfig{
		Backend:         backend,
		Conns:           m.conns,
		Timeout:         m.timeout,
		DeadConnTimeout: m.deadConnTimeout,
		Cookie:          m.cookie,
		ReadOnly:        readOnly,
		Index:           m.index,
		Server:          nbd.Config{Logger: log},
		Logger:          log,
	}
	attach := kernel.Attach
	if m.reattach {
		attach = kernel.Reattach
	}
	dev, err := attach(ctx, cfg)
	if err != nil {
		return fmt.Errorf("mapping %s: %w", what, err)
	}
	// one stream of work per kernel connection (package maxprocs)
	go maxprocs.Run(ctx, maxprocs.Config{Demand: func() int { return m.conns }, Logger: log})
	fmt.Fprintln(stdout, dev.Path())
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

// runNBDUnmap disconnects a device, by path or by cookie.
func runNBDUnmap(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nbd unmap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cookie := fs.String("cookie", "", "unmap the device carrying this backend cookie")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if (len(pos) == 1) == (*cookie != "") || len(pos) > 1 {
		return errors.New("give one /dev/nbdN or --cookie C")
	}
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
		if *cookie != "" {
			return fmt.Errorf("%s: devices attached without it carry no cookie; give /dev/nbdN",
				kernel.MissingFamilyCause(kernel.CurrentNetns("")))
		}
		return kernel.DisconnectIoctl(index)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	if *cookie != "" {
		if index, err = c.FindByCookie(*cookie); err != nil {
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

// runNBDList lists the nbd devices the kernel runs (through netlink or
// ioctls).
func runNBDList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nbd list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "plain", "plain or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || (*format != "plain" && *format != "json") {
		return errors.New("usage: purerbd nbd list [--format plain|json]")
	}
	devs, err := kernel.List("")
	if err != nil {
		return err
	}
	var list []mappedDevice
	for _, d := range devs {
		list = append(list, mappedDevice{Device: d.Path(), Cookie: d.Cookie, Size: d.Size, Conns: d.Connections})
	}
	return printMapped(stdout, list, *format)
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
