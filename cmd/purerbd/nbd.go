package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/internal/maxprocs"
	"github.com/purerbd/purerbd/internal/predecessor"
	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/rbdnbd"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// nbdCommand is the nbd group: serve, map, unmap, list.
func nbdCommand(g *globals) *cli.Command {
	c := &cli.Command{
		Name:    "nbd",
		Summary: "export RBD images, files or memory over NBD; map them to /dev/nbdX (nbd serve|map|unmap|list)",
		Help: `Exports RBD images (or files, or memory) over NBD, in userspace (serve)
or to the kernel as /dev/nbdN (map, unmap, list). serve --image and map
take Ceph's client options (-c, --id/-n, -k, -m, --ms-mode,
--connect-timeout); POOL defaults to rbd.`,
	}
	return c.Add(nbdServeCommand(g), nbdMapCommand(g), nbdUnmapCommand(), nbdListCommand())
}

// nbdServeOptions are serve's options.
type nbdServeOptions struct {
	socket, tcp string
	// name is the last of --export-name and --name; nameOpt is --name,
	// which names the client instead when an image is served
	name, exportName, nameOpt string
	desc, memory, file, image string
	snap                      string
	exclusive, readOnly       bool
	encryption                encryptionFlags
	tls                       nbdTLSFlags
	insecure                  bool
	maxConns                  int
	maxReply                  string
	handshakeSecs             float64
}

func newServeOptions() *nbdServeOptions {
	return &nbdServeOptions{maxConns: nbd.DefaultMaxConns, maxReply: fmt.Sprint(nbd.DefaultMaxReplyBytes>>20) + "M",
		handshakeSecs: nbd.DefaultHandshakeTimeout.Seconds()}
}

func nbdServeCommand(g *globals) *cli.Command { return newServeOptions().command(g) }

// command is serve with its options bound to o.
func (o *nbdServeOptions) command(g *globals) *cli.Command {
	c := &cli.Command{
		Name:    "serve",
		Summary: "serve an export over NBD until interrupted",
		Help: `Serves one export (--memory, --file or --image) over NBD until interrupted.
NBD has no authentication of its own: whoever reaches the socket can read and
write the export (an RBD image without cephx). --tcp without a host listens
on 127.0.0.1; another address is refused unless clients must present a
certificate (--tls-verify-peer --tls-ca CA.pem, with --tls-cert and --tls-key
or --tls-certificates DIR), or --insecure-listen says to serve anyone who can
reach it. With --image, --name names the client (as -n does) and
--export-name the export.`,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return serveExport(ctx, g, o, inv.Stdout, inv.Stderr)
		},
	}
	c.String(&o.socket, "--socket PATH", "listen on this Unix socket (mode 0600)")
	c.String(&o.tcp, "--tcp ADDR", "listen on this TCP address (no host: 127.0.0.1 only)")
	c.Func("--export-name NAME", "export name", func(v []string) error {
		o.exportName, o.name = v[0], v[0]
		return nil
	})
	c.Func("--name NAME", "export name (--export-name); with --image, the client's name (-n)", func(v []string) error {
		o.nameOpt, o.name = v[0], v[0]
		return nil
	})
	c.String(&o.desc, "--description TEXT", "export description")
	c.String(&o.memory, "--memory SIZE", "serve a sparse in-memory disk of this size (e.g. 1G)")
	c.String(&o.file, "--file PATH", "serve this file or block device")
	c.String(&o.image, "--image POOL/[NAMESPACE/]IMAGE[@SNAP]", "serve this RBD image")
	c.String(&o.snap, "--snap SNAP", "with --image: serve this snapshot (read-only)")
	c.Bool(&o.exclusive, "--exclusive", "with --image: keep the exclusive lock, refuse to hand it over")
	c.Bool(&o.readOnly, "--read-only", "serve read-only")
	o.encryption.register(c)
	o.tls.register(c)
	c.Bool(&o.insecure, "--insecure-listen", "allow --tcp on an address other hosts can reach without --tls-verify-peer: anyone reaching it can read and write the export")
	c.Int(&o.maxConns, "--max-connections N", "connections served at once; more are closed (0: no bound)")
	c.String(&o.maxReply, "--max-reply-bytes SIZE", "READ data one connection may owe its client before its requests stop being read")
	c.Float64(&o.handshakeSecs, "--handshake-timeout SECS", "seconds a client has to finish the handshake (TLS included)")
	return c
}

// serveExport serves one export (memory, file or RBD image) over NBD
// until interrupted, then shuts down in order.
func serveExport(ctx context.Context, g *globals, o *nbdServeOptions, stdout, stderr io.Writer) error {
	name := o.names(g)
	readOnly, desc, maxConns := o.readOnly, o.desc, o.maxConns
	sources := 0
	for _, v := range []string{o.memory, o.file, o.image} {
		if v != "" {
			sources++
		}
	}
	if sources != 1 {
		return errors.New("give exactly one of --memory, --file and --image")
	}
	if o.image == "" && (o.snap != "" || o.exclusive || o.encryption.given()) {
		return errors.New("--snap, --exclusive and --encryption-format need --image")
	}
	if err := o.encryption.check(); err != nil {
		return err
	}
	if o.socket == "" && o.tcp == "" {
		return errors.New("give --socket or --tcp")
	}
	tlsConfig, tlsRequired, err := o.tls.config()
	if err != nil {
		return err
	}
	if err := checkListenExposure(ctx, o.tcp, o.tls.verifyPeer, o.insecure); err != nil {
		return err
	}
	replyBytes, err := cli.ParseSize(o.maxReply, 1<<20)
	if err != nil || replyBytes <= 0 {
		return fmt.Errorf("--max-reply-bytes %q: want a size such as 32M", o.maxReply)
	}
	if maxConns < 0 || o.handshakeSecs <= 0 {
		return errors.New("--max-connections must be 0 or more, --handshake-timeout more than 0")
	}
	if maxConns == 0 {
		maxConns = -1 // nbd.Config: negative is no bound
	}

	var backend nbd.Backend
	switch {
	case o.memory != "":
		size, err := cli.ParseSize(o.memory, 1)
		if err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
		m, err := nbd.NewMemory(size)
		if err != nil {
			return err
		}
		backend = m
	case o.file != "":
		f, err := nbd.OpenFile(o.file, readOnly)
		if err != nil {
			return err
		}
		defer f.Close()
		backend = f
	default:
		ie, err := openImageExport(ctx, g, o.image, imageExportOptions{snap: o.snap, readOnly: readOnly, exclusive: o.exclusive, encryption: o.encryption})
		if err != nil {
			return err
		}
		defer ie.close(stderr)
		backend = ie.backend
		readOnly = readOnly || ie.img.ReadOnly()
		if desc == "" {
			desc = "rbd " + ie.spec.String()
		}
	}

	// Warnings (a refused connection at the limit) are always logged;
	// -v adds every connection's end.
	cfg := nbd.Config{
		Exports:          []*nbd.Export{{Name: name, Description: desc, Backend: backend, ReadOnly: readOnly}},
		TLSConfig:        tlsConfig,
		RequireTLS:       tlsRequired,
		MaxConns:         maxConns,
		MaxReplyBytes:    replyBytes,
		HandshakeTimeout: time.Duration(o.handshakeSecs * float64(time.Second)),
		Logger:           g.logger(slog.LevelWarn),
	}
	srv, err := nbd.NewServer(cfg)
	if err != nil {
		return err
	}

	var listeners []net.Listener
	if o.socket != "" {
		l, err := nbd.ListenUnix(o.socket, 0)
		if err != nil {
			return err
		}
		listeners = append(listeners, l)
		fmt.Fprintf(stdout, "nbd+unix:///%s?socket=%s\n", name, o.socket)
	}
	if o.tcp != "" {
		l, err := nbd.ListenTCP(o.tcp)
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

// names returns the export's name, and sets the client's: with --image,
// --name names the client (as -n does) and --export-name the export;
// without, either names the export (the last one given).
func (o *nbdServeOptions) names(g *globals) string {
	if o.image == "" {
		return o.name
	}
	if o.nameOpt != "" {
		g.conn.Name = o.nameOpt
	}
	return o.exportName
}

// imageExportOptions say how to open an image for NBD.
type imageExportOptions struct {
	snap       string
	readOnly   bool
	exclusive  bool
	encryption encryptionFlags
}

// imageExport is an RBD image open for serving over NBD, with the
// connection it uses.
type imageExport struct {
	spec    imageSpec
	conn    *rados.Conn
	img     *rbd.Image
	backend nbd.Backend
	role    *predecessor.Claim // writable images: this host's role of serving it
	log     *slog.Logger
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
func openImageExport(ctx context.Context, g *globals, arg string, o imageExportOptions) (*imageExport, error) {
	sp, err := parseImageArg(arg, o.snap)
	if err != nil {
		return nil, err
	}
	// the connect timeout bounds opening the image too
	cctx, cancel := context.WithTimeout(ctx, g.connectTimeout)
	defer cancel()
	log := g.logger(slog.LevelWarn)
	writable := !o.readOnly && sp.snap == ""
	var role *predecessor.Claim
	if writable {
		// a previous server of this image on this host that died left
		// its lock: prove it dead, fence it, take the lock at once
		role = takeImageRole(cctx, log, sp)
	}
	fail := func(err error) (*imageExport, error) {
		if role != nil {
			_ = role.Close()
		}
		return nil, err
	}
	conn, err := g.connectRados(cctx)
	if err != nil {
		return fail(err)
	}
	opts := rbd.OpenOptions{
		ReadOnly: o.readOnly,
		Snapshot: sp.snap,
		Logger:   log,
	}
	if role != nil {
		// fenced while the image opens; its lock is broken once fenced
		wait, err := role.AdoptAsync(cctx, conn)
		if err != nil {
			log.Warn("a previous server of the image cannot be fenced: its lock breaks when its watch times out", "err", err)
		}
		opts.Fencing = wait
	}
	ioc, err := conn.IOContext(cctx, sp.pool, sp.ns)
	if err != nil {
		_ = conn.Close()
		return fail(err)
	}
	if writable {
		opts.AcquireLock = true
		if o.exclusive {
			opts.LockPolicy = rbd.LockRefuse
		}
	}
	img, err := rbd.Open(cctx, ioc, sp.name, opts)
	if err != nil {
		_ = conn.Close()
		return fail(fmt.Errorf("opening %s: %w", sp, err))
	}
	// Unlocking runs the keyslot's KDF, slow on purpose (seconds), so
	// the connect timeout does not bound it.
	served := rbdnbd.Image(img)
	enc, err := o.encryption.open(ctx, img)
	if err != nil {
		_ = img.Close()
		_ = conn.Close()
		return fail(fmt.Errorf("%s: %w", sp, err))
	}
	if enc != nil {
		served = enc
	}
	return &imageExport{spec: sp, conn: conn, img: img, backend: rbdnbd.New(served), role: role, log: log}, nil
}

// close closes the image (releasing its lock) and the connection.
func (e *imageExport) close(stderr io.Writer) {
	err := e.img.Close()
	if err != nil {
		fmt.Fprintf(stderr, "purerbd nbd: closing %s: %v\n", e.spec, err)
	}
	fsid, addr := e.conn.FSID(), e.conn.ClientAddr()
	// what the client sent, for -v: messages over writes is how well
	// the served requests' sends batched
	st := e.conn.Stats().OSD
	e.log.Info("rados connection closed", "image", e.spec.String(), "osd_requests", st.Requests,
		"osd_messages", st.Written.Messages, "osd_writes", st.Written.Writes, "osd_written_bytes", st.Written.Bytes)
	_ = e.conn.Close()
	if e.role != nil {
		if err == nil {
			// the lock was released: a successor has nothing to fence
			_ = e.role.Forget(fsid, addr)
		}
		_ = e.role.Close()
	}
}
