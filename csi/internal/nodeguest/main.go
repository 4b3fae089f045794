// Command nodeguest runs inside the test VM of the csi package's node
// service (node_vm_test.go there). "scenario" plays the CO: it starts
// copies of itself as "plugin" (the node service, serving CSI on a unix
// socket, with images that are files), calls them over gRPC, kills and
// restarts them, and checks the volumes from the guest's side;
// "rbd-scenario" does the core of that on real RBD images (ext4, raw
// block and xfs), the plugin it SIGKILLs and restarts being the
// purerbd-csi binary itself. Each prints "RESULT ok <json>" or "RESULT
// fail <reason>" for the host to read. The package's test binary holds the
// guest's tests of the purerbd-csi binary itself (lifecycle, two nodes,
// csi-sanity), run with -guest.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nodeguest scenario | rbd-scenario [flags] | plugin [flags]")
		os.Exit(2)
	}
	ctx := context.Background()
	var err error
	switch os.Args[1] {
	case "scenario":
		err = runScenario(ctx)
	case "rbd-scenario":
		err = runRBDScenario(ctx, os.Args[2:])
	case "plugin":
		err = runPlugin(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodeguest %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func logger(proc string) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("proc", proc)
}
