// Command purerbd is the purerbd admin CLI. Its verbs and flags follow
// Ceph's own `ceph`, `rados`, `rbd`, `crushtool` and `osdmaptool` where they
// overlap, so their outputs can be compared line by line.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// exitStatus is an error a verb returns after reporting the failure
// itself (as `ceph` does): it only sets the process's exit status.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// command is one top-level verb of the CLI.
type command struct {
	summary string
	// run executes the verb with the arguments after its name, writing its
	// normal output to stdout. It returns an error for the exit status.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists every verb. Each verb lives in a file named after it.
func commands() map[string]command {
	return map[string]command{
		"version": {summary: "print the purerbd version", run: runVersion},
		"nbd":     {summary: "export RBD images, files or memory over NBD; map them to /dev/nbdX (nbd serve|map|unmap|list)", run: runNBD},
		"crush":   {summary: "test placements with a CRUSH map (like crushtool --test)", run: runCrush},
		"osdmap":  {summary: "map objects and PGs with an OSDMap (like osdmaptool --test-map-*)", run: runOSDMap},
		"rbd":     {summary: "manage RBD images (create, info, ls, rm, resize, snap, import, export, bench)", run: runRBD},
		"status":  {summary: "show the cluster's fsid, health, monitors, quorum, OSDs and pools", run: runStatus},
		"mon":     {summary: "run a monitor command and print its output like ceph (mon command '<json>')", run: runMon},
		"rados":   {summary: "object operations like the rados tool (put, get, ls, stat, xattrs, omap, bench)", run: runRados},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile := startCPUProfile(os.Stderr)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stopProfile()
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "purerbd: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	if err := c.run(ctx, args[1:], stdout, stderr); err != nil {
		var st exitStatus
		if errors.As(err, &st) { // already reported by the verb
			return int(st)
		}
		fmt.Fprintf(stderr, "purerbd %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: purerbd <command> [flags] [args]")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, cmds[n].summary)
	}
}
