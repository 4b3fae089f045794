package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/purerbd/purerbd/internal/maxprocs"
	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/rbdnbd"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

const nbdUsage = `usage: purerbd nbd <verb> ...
verbs:
  serve (--memory SIZE | --file PATH | --image POOL/IMAGE[@SNAP] [--snap S] [--exclusive])
        [--read-only] (--socket PATH | --tcp ADDR) [--export-name NAME] [TLS flags]
        [--max-connections N] [--max-reply-bytes SIZE] [--handshake-timeout SECS]
        [--insecure-listen]
        serve an export over NBD until interrupted. NBD has no authentication
        of its own: whoever reaches the socket can read and write the export
        (an RBD image without cephx). --tcp without a host listens on
        127.0.0.1; another address is refused unless clients must present a
        certificate (--tls-verify-peer --tls-ca CA.pem, with --tls-cert and
        --tls-key or --tls-certificates DIR), or --insecure-listen says to
        serve anyone who can reach it
  map [--snap S] [--read-only] [--exclusive] [--conns N] [--timeout SECS]
      [--dead-conn-timeout SECS] [--cookie C] [--device /dev/nbdN] [--reattach]
      [--release-on-exit] POOL/IMAGE[@SNAP] | --memory SIZE | --file PATH
        attach an RBD image (or a memory disk, or a file) to the kernel as
        /dev/nbdN and serve it in the foreground (like rbd-nbd map, in this
        process); Ctrl-C unmaps
  unmap /dev/nbdN | --cookie C
        disconnect a device (its server then exits)
  list [--format json]
        list the connected nbd devices with their cookies
serve --image and map take Ceph's client options too (-c, --id/-n,
-k, -m, --ms-mode, --connect-timeout); POOL defaults to rbd.`

// runNBD dispatches the `purerbd nbd` sub-verbs.
func runNBD(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	verb := ""
	if len(args) > 0 {
		verb = args[0]
	}
	switch verb {
	case "serve":
		return runNBDServe(ctx, args[1:], stdout, stderr)
	case "map":
		return runNBDMap(ctx, args[1:], stdout, stderr)
	case "unmap":
		return runNBDUnmap(ctx, args[1:], stdout, stderr)
	case "list", "list-mapped":
		return runNBDList(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(stderr, nbdUsage)
		return nil
	}
	fmt.Fprintln(stderr, nbdUsage)
	if verb == "" {
		return errors.New("missing verb")
	}
	return fmt.Errorf("unknown verb %q", verb)
}

// runNBDServe serves one export (memory, file or RBD image) over NBD
// until interrupted, then shuts down in order.
func runNBDServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// With --image the client options are Ceph's, and -n/--name is the
	// client's name; otherwise --name stays the export name.
	var g globalFlags
	if hasFlag(args, "image") {
		var err error
		if g, args, err = parseGlobalFlags(args); err != nil {
			return err
		}
	}
	fs := flag.NewFlagSet("nbd serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "listen on this Unix socket (mode 0600)")
	tcp := fs.String("tcp", "", "listen on this TCP address (no host: 127.0.0.1 only)")
	var name string
	fs.StringVar(&name, "export-name", "", "export name")
	if !hasFlag(args, "image") {
		fs.StringVar(&name, "name", "", "export name (--export-name)")
	}
	desc := fs.String("description", "", "export description")
	memory := fs.String("memory", "", "serve a sparse in-memory disk of this size (e.g. 1G)")
	file := fs.String("file", "", "serve this file or block device")
	image := fs.String("image", "", "serve this RBD image: POOL/[NAMESPACE/]IMAGE[@SNAP]")
	snap := fs.String("snap", "", "with --image: serve this snapshot (read-only)")
	exclusive := fs.Bool("exclusive", false, "with --image: keep the exclusive lock, refuse to hand it over")
	readOnly := fs.Bool("read-only", false, "serve read-only")
	var tlsFlags nbdTLSFlags
	tlsFlags.register(fs)
	insecure := fs.Bool("insecure-listen", false, "allow --tcp on an address other hosts can reach without --tls-verify-peer: anyone reaching it can read and write the export")
	maxConns := fs.Int("max-connections", nbd.DefaultMaxConns, "connections served at once; more are closed (0: no bound)")
	maxReply := fs.String("max-reply-bytes", fmt.Sprint(nbd.DefaultMaxReplyBytes>>20)+"M", "READ data one connection may owe its client before its requests stop being read")
	handshakeSecs := fs.Float64("handshake-timeout", nbd.DefaultHandshakeTimeout.Seconds(), "seconds a client has to finish the handshake (TLS included)")
	verbose := fs.Bool("v", false, "log connections")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	sources := 0
	for _, v := range []string{*memory, *file, *image} {
		if v != "" {
			sources++
		}
	}
	if sources != 1 {
		return errors.New("give exactly one of --memory, --file and --image")
	}
	if *image == "" && (*snap != "" || *exclusive) {
		return errors.New("--snap and --exclusive need --image")
	}
	if *socket == "" && *tcp == "" {
		return errors.New("give --socket or --tcp")
	}
	tlsConfig, tlsRequired, err := tlsFlags.config()
	if err != nil {
		return err
	}
	if err := checkListenExposure(ctx, *tcp, tlsFlags.verifyPeer, *insecure); err != nil {
		return err
	}
	replyBytes, err := rbdSize(*maxReply, 1<<20)
	if err != nil || replyBytes <= 0 {
		return fmt.Errorf("--max-reply-bytes %q: want a size such as 32M", *maxReply)
	}
	if *maxConns < 0 || *handshakeSecs <= 0 {
		return errors.New("--max-connections must be 0 or more, --handshake-timeout more than 0")
	}
	if *maxConns == 0 {
		*maxConns = -1 // nbd.Config: negative is no bound
	}

	var backend nbd.Backend
	switch {
	case *memory != "":
		size, err := rbdSize(*memory, 1)
		if err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
		m, err := nbd.NewMemory(size)
		if err != nil {
			return err
		}
		backend = m
	case *file != "":
		f, err := nbd.OpenFile(*file, *readOnly)
		if err != nil {
			return err
		}
		defer f.Close()
		backend = f
	default:
		ie, err := openImageExport(ctx, g, *image, imageExportOptions{snap: *snap, readOnly: *readOnly, exclusive: *exclusive}, stderr)
		if err != nil {
			return err
		}
		defer ie.close(stderr)
		backend = ie.backend
		*readOnly = *readOnly || ie.img.ReadOnly()
		if *desc == "" {
			*desc = "rbd " + ie.spec.String()
		}
	}

	// Warnings (a refused connection at the limit) are always logged;
	// -v adds every connection's end.
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	cfg := nbd.Config{
		Exports:          []*nbd.Export{{Name: name, Description: *desc, Backend: backend, ReadOnly: *readOnly}},
		TLSConfig:        tlsConfig,
		RequireTLS:       tlsRequired,
		MaxConns:         *maxConns,
		MaxReplyBytes:    replyBytes,
		HandshakeTimeout: time.Duration(*handshakeSecs * float64(time.Second)),
		Logger:           slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
	}
	srv, err := nbd.NewServer(cfg)
	if err != nil {
		return err
	}

	var listeners []net.Listener
	if *socket != "" {
		l, err := nbd.ListenUnix(*socket, 0)
		if err != nil {
			return err
		}
		listeners = append(listeners, l)
		fmt.Fprintf(stdout, "nbd+unix:///%s?socket=%s\n", name, *socket)
	}
	if *tcp != "" {
		l, err := nbd.ListenTCP(*tcp)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return err
		}
		listeners = append(listeners, l)
		fmt.Fprintf(stdout, "nbd://%s/%s\n", l.Addr(), name)
	}

	go maxprocs.Run(ctx, maxprocs.Config{Demand: srv.Transmitting, Logger: cfg.Logger})
	errs := make(chan error, len(listeners))
	for _, l := range listeners {
		go func() { errs <- srv.Serve(context.Background(), l) }()
	}
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil && err == nil {
		err = serr
	}
	if errors.Is(err, nbd.ErrServerClosed) {
		err = nil
	}
	return err
}

// hasFlag reports whether args hold -name or --name (with or without
// "=value"), before any "--".
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// imageExportOptions say how to open an image for NBD.
type imageExportOptions struct {
	snap      string
	readOnly  bool
	exclusive bool
}

// imageExport is an RBD image open for serving over NBD, with the
// connection it uses.
type imageExport struct {
	spec    imageSpec
	conn    *rados.Conn
	img     *rbd.Image
	backend nbd.Backend
}

// String is POOL/[NAMESPACE/]IMAGE[@SNAP].
func (sp imageSpec) String() string {
	s := sp.pool + "/"
	if sp.ns != "" {
		s += sp.ns + "/"
	}
	s += sp.name
	if sp.snap != "" {
		s += "@" + sp.snap
	}
	return s
}

// parseImageArg reads POOL/[NAMESPACE/]IMAGE[@SNAP] (POOL defaults to
// rbd); a --snap flag must agree with an @SNAP in the spec.
func parseImageArg(arg, snap string) (imageSpec, error) {
	sp, err := (&rbdCommand{pool: "rbd"}).parseSpec(arg, false)
	if err != nil {
		return sp, err
	}
	if snap != "" {
		if sp.snap != "" && sp.snap != snap {
			return sp, fmt.Errorf("snapshot given twice: %q and --snap %q", sp.snap, snap)
		}
		sp.snap = snap
	}
	return sp, nil
}

// openImageExport connects to the cluster and opens the image. A
// writable image takes the exclusive lock at once (block status then
// answers from the object map in memory); one Image serves every
// connection, so they are coherent and multi-conn is advertised.
func openImageExport(ctx context.Context, g globalFlags, arg string, o imageExportOptions, stderr io.Writer) (*imageExport, error) {
	sp, err := parseImageArg(arg, o.snap)
	if err != nil {
		return nil, err
	}
	if g.connectTimeout == 0 {
		g.connectTimeout = defaultConnectTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, g.connectTimeout)
	defer cancel()
	conn, err := rados.ConnectFromConf(cctx, g.conn)
	if err != nil {
		return nil, err
	}
	ioc, err := conn.IOContext(cctx, sp.pool, sp.ns)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	opts := rbd.OpenOptions{
		ReadOnly: o.readOnly,
		Snapshot: sp.snap,
		Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if !o.readOnly && sp.snap == "" {
		opts.AcquireLock = true
		if o.exclusive {
			opts.LockPolicy = rbd.LockRefuse
		}
	}
	img, err := rbd.Open(cctx, ioc, sp.name, opts)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("opening %s: %w", sp, err)
	}
	return &imageExport{spec: sp, conn: conn, img: img, backend: rbdnbd.New(img)}, nil
}

// close closes the image (releasing its lock) and the connection.
func (e *imageExport) close(stderr io.Writer) {
	if err := e.img.Close(); err != nil {
		fmt.Fprintf(stderr, "purerbd nbd: closing %s: %v\n", e.spec, err)
	}
	_ = e.conn.Close()
}
