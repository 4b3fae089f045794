package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/purerbd/purerbd/internal/maxprocs"
	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/rbdnbd"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/cephconf"
	"github.com/purerbd/purerbd/rbd"
	"github.com/purerbd/purerbd/rbd/luks"
)

// runServe is `purerbd-bench serve`: an NBD server on a Unix socket
// exporting an RBD image (the userspace export the suite compares with
// qemu-nbd over librbd) or a memory disk (what `purerbd nbd serve
// --memory` serves, here with profiling), until interrupted.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conf := fs.String("c", "", "ceph.conf (its [client] keyring is used)")
	pool := fs.String("p", "rbd", "pool")
	image := fs.String("image", "", "export this RBD image")
	memory := fs.String("memory", "", "export a memory disk of this size instead")
	socket := fs.String("socket", "", "Unix socket to listen on")
	luksPass := fs.String("luks-passphrase-file", "", "with --image: serve the plaintext of a LUKS-encrypted image, unlocked with this file's content")
	var prof profiles
	fs.StringVar(&prof.cpu, "cpuprofile", "", "write a CPU profile of the serving time here")
	fs.StringVar(&prof.allocs, "memprofile", "", "write an allocation profile here at exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*image == "") == (*memory == "") || *socket == "" {
		return errors.New("give --socket and exactly one of --image and --memory")
	}
	var backend nbd.Backend
	if *memory != "" {
		size, err := parseSize(*memory)
		if err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
		if backend, err = nbd.NewMemory(size); err != nil {
			return err
		}
	} else {
		conn, err := rados.ConnectFromConf(ctx, cephconf.Args{Conf: *conf})
		if err != nil {
			return err
		}
		defer conn.Close()
		ioc, err := conn.IOContext(ctx, *pool, "")
		if err != nil {
			return err
		}
		img, err := rbd.Open(ctx, ioc, *image, rbd.OpenOptions{})
		if err != nil {
			return err
		}
		defer img.Close()
		if *luksPass == "" {
			backend = rbdnbd.New(img)
		} else {
			pass, err := os.ReadFile(*luksPass)
			if err != nil {
				return err
			}
			plain, err := luks.Open(ctx, img, pass, 0)
			clear(pass)
			if err != nil {
				return fmt.Errorf("--luks-passphrase-file: %w", err)
			}
			backend = rbdnbd.New(plain)
		}
	}
	srv, err := nbd.NewServer(nbd.Config{Exports: []*nbd.Export{{Backend: backend}}})
	if err != nil {
		return err
	}
	l, err := nbd.ListenUnix(*socket, 0)
	if err != nil {
		return err
	}
	if err := prof.start(); err != nil {
		l.Close()
		return err
	}
	fmt.Fprintf(stdout, "nbd+unix:///?socket=%s\n", *socket)
	// its changes go to the server's log in the work directory
	go maxprocs.Run(ctx, maxprocs.Config{Demand: srv.Transmitting, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(context.Background(), l) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil && err == nil {
		err = serr
	}
	if errors.Is(err, nbd.ErrServerClosed) {
		err = nil
	}
	if perr := prof.stop(); err == nil {
		err = perr
	}
	return err
}
