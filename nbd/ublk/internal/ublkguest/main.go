// Command ublkguest runs inside the test VM of package ublk (see
// vm_test.go there): "scenario" drives the whole test as the child of
// init and starts copies of itself as "serve" and "recover", the server
// processes it kills and replaces; "absent" checks that a kernel without
// ublk is reported as such (ublk.ErrUnsupported). It prints "RESULT ok
// <json>" or "RESULT fail <reason>" for the host to read.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ublkguest scenario | absent | serve FILE | recover ID FILE")
		os.Exit(2)
	}
	ctx := context.Background()
	var err error
	switch os.Args[1] {
	case "scenario":
		err = runScenario(ctx)
	case "absent":
		err = runAbsent(ctx)
	case "serve", "recover":
		err = runServer(ctx, os.Args[1], os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ublkguest %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func logger(proc string) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("proc", proc)
}
