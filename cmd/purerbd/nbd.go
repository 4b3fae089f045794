package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/purerbd/purerbd/nbd"
)

// runNBD dispatches the `purerbd nbd` sub-verbs.
func runNBD(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprintln(stderr, "usage: purerbd nbd serve [flags]")
		return errors.New("missing or unknown sub-command (want serve)")
	}
	return runNBDServe(ctx, args[1:], stdout, stderr)
}

// runNBDServe serves one export (memory or file) over NBD until
// interrupted, then shuts down in order.
func runNBDServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nbd serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "listen on this Unix socket (mode 0600)")
	tcp := fs.String("tcp", "", "listen on this TCP address (no host: 127.0.0.1 only)")
	name := fs.String("name", "", "export name")
	desc := fs.String("description", "", "export description")
	memory := fs.String("memory", "", "serve a sparse in-memory disk of this size (e.g. 1G)")
	file := fs.String("file", "", "serve this file or block device")
	readOnly := fs.Bool("read-only", false, "serve read-only")
	tlsCert := fs.String("tls-cert", "", "TLS certificate (PEM) enabling NBD_OPT_STARTTLS")
	tlsKey := fs.String("tls-key", "", "TLS private key (PEM)")
	tlsRequired := fs.Bool("tls-required", false, "refuse clients that do not start TLS")
	verbose := fs.Bool("v", false, "log connections")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*memory == "") == (*file == "") {
		return errors.New("give exactly one of --memory and --file")
	}
	if *socket == "" && *tcp == "" {
		return errors.New("give --socket or --tcp")
	}

	var backend nbd.Backend
	if *memory != "" {
		size, err := parseSize(*memory)
		if err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
		m, err := nbd.NewMemory(size)
		if err != nil {
			return err
		}
		backend = m
	} else {
		f, err := nbd.OpenFile(*file, *readOnly)
		if err != nil {
			return err
		}
		defer f.Close()
		backend = f
	}

	cfg := nbd.Config{
		Exports:    []*nbd.Export{{Name: *name, Description: *desc, Backend: backend, ReadOnly: *readOnly}},
		RequireTLS: *tlsRequired,
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	if *tlsCert != "" || *tlsKey != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		cfg.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
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
		fmt.Fprintf(stdout, "nbd+unix:///%s?socket=%s\n", *name, *socket)
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
		fmt.Fprintf(stdout, "nbd://%s/%s\n", l.Addr(), *name)
	}

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

// parseSize reads a byte count with an optional binary suffix (K, M, G,
// T; "1G" is 1 GiB).
func parseSize(s string) (int64, error) {
	mult := int64(1)
	if n := len(s); n > 0 {
		switch strings.ToUpper(s[n-1:]) {
		case "K":
			mult = 1 << 10
		case "M":
			mult = 1 << 20
		case "G":
			mult = 1 << 30
		case "T":
			mult = 1 << 40
		}
		if mult != 1 {
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}
