package main

import (
	"context"
	"io"
	"strings"

	"github.com/purerbd/purerbd/internal/cli"
)

// execute runs `purerbd WORDS... ARGS...` in this process as the binary
// does (a failure is reported on stderr) and returns the error, for tests
// that look at it.
func execute(ctx context.Context, words []string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	err := cli.Execute(ctx, newRoot(), append(words, args...), cli.Streams{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	cli.Report(err, stderr)
	return err
}

// runRBD runs `purerbd rbd ARGS`.
func runRBD(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return execute(ctx, []string{"rbd"}, args, nil, stdout, stderr)
}

// runNBD runs `purerbd nbd ARGS`.
func runNBD(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return execute(ctx, []string{"nbd"}, args, nil, stdout, stderr)
}

// runNBDServe runs `purerbd nbd serve ARGS`.
func runNBDServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return execute(ctx, []string{"nbd", "serve"}, args, nil, stdout, stderr)
}

// parseMapArgs reads `purerbd nbd map ARGS` as map does before it
// attaches anything.
func parseMapArgs(args []string, _ io.Writer) (mapFlags, error) {
	o := newMapOptions()
	inv, err := cli.Parse(o.command(newGlobals()), args)
	if err != nil {
		return mapFlags{}, err
	}
	return o.check(inv.Args)
}

// runRadosWithInput runs `purerbd rados ARGS` with stdin as its standard
// input.
func runRadosWithInput(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return execute(ctx, []string{"rados"}, args, stdin, stdout, stderr)
}
