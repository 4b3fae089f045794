// Command purerbd is the purerbd admin CLI. Its verbs and options follow
// Ceph's own `ceph`, `rados`, `rbd`, `crushtool` and `osdmaptool` where
// they overlap, so their outputs can be compared line by line.
//
// Every verb is a command of one tree (internal/cli): the root declares
// the options all verbs take (globals.go), each group or verb lives in a
// file named after it, and a new verb is a function returning its
// *cli.Command, added to its group. A binary reached under another name
// (rbd, rados, rbd-nbd) runs that group's verbs (multicall.go).
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/purerbd/purerbd/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, multiCallArgs(os.Args[0], os.Args[1:]), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args, with the process's standard input, and
// returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Run(ctx, newRoot(), args, cli.Streams{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr})
}

// newRoot builds the command tree: the global options and every verb.
func newRoot() *cli.Command { return newRootWith(newGlobals()) }

// newRootWith builds the tree with its global options bound to g.
func newRootWith(g *globals) *cli.Command {
	root := &cli.Command{
		Name: "purerbd",
		Help: `purerbd's admin CLI: Ceph's rbd and rados, a monitor client, CRUSH and
OSDMap tests, and NBD exports of RBD images, in one static binary.`,
	}
	g.register(root)
	return root.Add(
		versionCommand(),
		newRBDCommand(g),
		newRadosCommand(g),
		nbdCommand(g),
		rbdNBDCommand(g),
		deviceCommand(g),
		statusCommand(g),
		monCommand(g),
		crushCommand(),
		osdmapCommand(),
	)
}
