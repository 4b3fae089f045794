// Command purerbd is the purerbd admin CLI. Its verbs and options follow
// Ceph's own `ceph`, `rados`, `rbd`, `crushtool` and `osdmaptool` where
// they overlap, so their outputs can be compared line by line.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/purerbd/purerbd/internal/cli"
)

// exitStatus is an error a verb returns after reporting the failure
// itself (as `ceph` does): it only sets the process's exit status.
type exitStatus = cli.ExitStatus

// legacyCommand is a verb not yet on the command tree.
type legacyCommand func(ctx context.Context, args []string, stdout, stderr io.Writer) error

func legacyCommands() map[string]legacyCommand {
	return map[string]legacyCommand{
		"rbd": runRBD,
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args, with the process's standard input, and
// returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWithInput(ctx, args, os.Stdin, stdout, stderr)
}

// runWithInput is run with stdin as the standard input.
func runWithInput(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if legacy, ok := legacyCommands()[args[0]]; ok {
			err := legacy(ctx, args[1:], stdout, stderr)
			var st exitStatus
			if errors.As(err, &st) {
				return int(st)
			}
			if err != nil {
				fmt.Fprintf(stderr, "purerbd %s: %v\n", args[0], err)
				return 1
			}
			return 0
		}
	}
	return cli.Run(ctx, newRoot(), args, cli.Streams{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// newRoot builds the command tree: the global options and every verb.
func newRoot() *cli.Command {
	g := newGlobals()
	root := &cli.Command{
		Name: "purerbd",
		Help: `purerbd's admin CLI: Ceph's rbd and rados, a monitor client, CRUSH and
OSDMap tests, and NBD exports of RBD images, in one static binary.`,
	}
	g.register(root)
	return root.Add(
		versionCommand(),
		statusCommand(g),
		monCommand(g),
		crushCommand(),
		osdmapCommand(),
		nbdCommand(g),
		newRadosCommand(g),
	)
}
