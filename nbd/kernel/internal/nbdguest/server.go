package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/kernel"
)

// runServer is a server process: it attaches (or reattaches) a file
// backend, says "ready <index> <conns> <reattachable>" on stdout and
// obeys commands on stdin: "resize <bytes>", "detach", "release",
// "stats" (answers "stats <trim requests> <trimmed bytes>").
func runServer(ctx context.Context, mode string, args []string) error {
	fs := flag.NewFlagSet(mode, flag.ContinueOnError)
	file := fs.String("file", "", "backing file")
	cookie := fs.String("cookie", "", "backend cookie")
	conns := fs.Int("conns", 0, "connections (reattach: as configured)")
	bs := fs.Uint("bs", 4096, "block size")
	dead := fs.Duration("dead", time.Minute, "dead connection timeout")
	timeout := fs.Duration("timeout", time.Minute, "request timeout (with -min-timeout: its ceiling)")
	minTimeout := fs.Duration("min-timeout", 0, "floor of an adaptive request timeout (0: fixed)")
	resend := fs.Duration("resend", 0, "no request timeout; requests in flight at a restart are resent this often once reattached (one connection)")
	holdFor := fs.Duration("hold", 0, "reattach: hold the device's connections this long before serving them (kernel.Hold), as a successor opening its backend does; says \"held <index>\" when they are")
	abandonFirst := fs.Bool("abandon-first", false, "with -hold: abandon the first hold and hold again, as a successor whose backend failed to open and that tries again")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := logger(mode)
	f, err := nbd.OpenFile(*file, false)
	if err != nil {
		return err
	}
	defer f.Close()
	backend := &countingFile{File: f}
	cfg := kernel.AttachConfig{
		Backend:         backend,
		BlockSize:       uint32(*bs),
		Conns:           *conns,
		Timeout:         *timeout,
		MinTimeout:      *minTimeout,
		ResendInterval:  *resend,
		DeadConnTimeout: *dead,
		Cookie:          *cookie,
		Index:           kernel.AnyIndex,
		Logger:          log,
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	var dev *kernel.Device
	switch {
	case mode == "serve":
		dev, err = kernel.Attach(actx, cfg)
	case *holdFor > 0:
		dev, err = holdAndServe(actx, cfg, *holdFor, *abandonFirst)
	default:
		dev, err = kernel.Reattach(actx, cfg)
	}
	cancel()
	if err != nil {
		return err
	}
	fmt.Printf("ready %d %d %v\n", dev.Index(), dev.Conns(), dev.Reattachable())

	cmds := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmds <- sc.Text()
		}
		close(cmds)
	}()
	for {
		select {
		case <-dev.Done():
			return fmt.Errorf("serving ended on its own: %v", dev.Err())
		case line, ok := <-cmds:
			if !ok {
				// The scenario went away: keep serving until killed.
				cmds = nil
				continue
			}
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := command(cctx, dev, f)
			cancel()
			if err != nil {
				return fmt.Errorf("%s: %w", line, err)
			}
			switch f[0] {
			case "resize":
				fmt.Printf("resized %d\n", backend.Size())
			case "detach":
				fmt.Println("detached")
				return nil
			case "release":
				fmt.Println("released")
				return nil
			case "stats":
				fmt.Printf("stats %d %d\n", backend.trims.Load(), backend.trimBytes.Load())
			}
		}
	}
}

func command(ctx context.Context, dev *kernel.Device, f []string) error {
	switch f[0] {
	case "resize":
		if len(f) != 2 {
			return fmt.Errorf("usage: resize <bytes>")
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return err
		}
		return dev.Resize(ctx, n)
	case "detach":
		return dev.Detach(ctx)
	case "release":
		return dev.Release(ctx)
	case "stats":
		return nil
	}
	return fmt.Errorf("unknown command")
}

// countingFile is the file backend with a count of the TRIM requests
// that reach it (the "stats" command prints them), so the scenario can
// tell that fstrim in the guest arrived at the backend as NBD_CMD_TRIM.
// Embedding keeps every optional interface of *nbd.File.
type countingFile struct {
	*nbd.File
	trims     atomic.Int64
	trimBytes atomic.Int64
}

func (c *countingFile) Trim(ctx context.Context, off, length int64) error {
	c.trims.Add(1)
	c.trimBytes.Add(length)
	return c.File.Trim(ctx, off, length)
}

// holdAndServe takes a device over in two steps (kernel.Hold, Serve),
// waiting d between them; with abandonFirst it abandons a first hold and
// holds again.
func holdAndServe(ctx context.Context, cfg kernel.AttachConfig, d time.Duration, abandonFirst bool) (*kernel.Device, error) {
	backend := cfg.Backend
	cfg.Backend = nil
	h, err := kernel.Hold(ctx, cfg)
	if err != nil {
		return nil, err
	}
	fmt.Printf("held %d\n", h.Index())
	if abandonFirst {
		time.Sleep(d / 2)
		h.Abandon()
		fmt.Printf("abandoned %d\n", h.Index())
		if h, err = kernel.Hold(ctx, cfg); err != nil {
			return nil, fmt.Errorf("holding again after abandoning: %w", err)
		}
		fmt.Printf("held %d\n", h.Index())
	}
	time.Sleep(d)
	return h.Serve(ctx, backend, backend.Size(), cfg.ReadOnly)
}
