// Command purerbd-dev holds purerbd's developer tools: they link test
// machinery (throwaway Ceph clusters, the chaos workload), which the
// shipped binaries under cmd/ must not. `make demo` runs its demo,
// `make chaos` its chaos run.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/purerbd/purerbd/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, newRoot(), os.Args[1:], cli.Streams{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}

// newRoot builds the command tree.
func newRoot() *cli.Command {
	root := &cli.Command{
		Name: "purerbd-dev",
		Help: `purerbd's developer tools. They link test machinery (throwaway Ceph
clusters, the chaos workload), so they are not in the shipped binaries.`,
	}
	return root.Add(demoCommand(), chaosCommand())
}
