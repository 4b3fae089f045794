// Command nbdguest runs inside the test VM of package kernel (see
// vm_test.go there): "scenario" drives the whole test as the child of
// init and starts copies of itself as "serve" and "reattach", the server
// processes that it kills and replaces; "smoke" is the short check of a
// kernel (module load, one attach, a CONNECT from another network
// namespace); "adaptive" does the same for the
// adaptive request timeout ("adaptive-stall" adds a backend stall that
// reproduces a wedge, see runAdaptive). It prints "RESULT ok <json>" or
// "RESULT fail <reason>" for the host to read.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nbdguest scenario | smoke | adaptive | adaptive-stall | serve [flags] | reattach [flags]")
		os.Exit(2)
	}
	ctx := context.Background()
	var err error
	switch os.Args[1] {
	case "scenario":
		err = runScenario(ctx)
	case "smoke":
		err = runSmoke(ctx)
	case "adaptive", "adaptive-stall":
		err = runAdaptive(ctx, os.Args[1] == "adaptive-stall")
	case "adaptive-repeat":
		err = runAdaptiveRepeat(ctx, 8)
	case "serve", "reattach":
		err = runServer(ctx, os.Args[1], os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nbdguest %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func logger(proc string) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("proc", proc)
}
