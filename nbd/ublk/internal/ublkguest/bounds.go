package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/purerbd/purerbd/nbd/ublk"
)

// serveTimeout bounds ublk.Serve in the scenario's steps: adding and
// starting a device takes well under a second here, and one that never
// returns should fail its step with the stacks that show where it waits
// rather than run into the whole VM's timeout.
const serveTimeout = time.Minute

// serve runs ublk.Serve under serveTimeout. When the bound runs out it
// prints the stacks at once, whether or not Serve returns after that (the
// wait for the queues' first fetches does not watch ctx).
func serve(ctx context.Context, cfg ublk.Config) (*ublk.Device, error) {
	sctx, cancel := context.WithTimeout(ctx, serveTimeout)
	defer cancel()
	stop := context.AfterFunc(sctx, func() {
		if errors.Is(sctx.Err(), context.DeadlineExceeded) {
			fmt.Fprintf(os.Stderr, "ublk.Serve did not return within %s\n", serveTimeout)
			dumpStacks()
		}
	})
	defer stop()
	dev, err := ublk.Serve(sctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return dev, nil
}

// dumpStacks prints the process's goroutines and its threads' kernel
// stacks to the console.
func dumpStacks() {
	buf := make([]byte, 1<<20)
	fmt.Fprintf(os.Stderr, "goroutines:\n%s\n", buf[:runtime.Stack(buf, true)])
	tasks, _ := filepath.Glob("/proc/self/task/*/stack")
	for _, t := range tasks {
		if b, err := os.ReadFile(t); err == nil {
			fmt.Fprintf(os.Stderr, "%s:\n%s\n", t, b)
		}
	}
}
