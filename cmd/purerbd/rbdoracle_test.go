package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados/radostest"
)

// Running one command line through Ceph's rbd (the oracle) and through
// purerbd rbd on the same cluster, for the verbs whose output and exit
// codes must agree.

// cmdResult is what a command line produced.
type cmdResult struct {
	stdout, stderr string
	code           int
}

// cephRbd runs Ceph's rbd with args (and stdin, if not nil).
func cephRbd(t *testing.T, ctx context.Context, c *radostest.Cluster, stdin io.Reader, args ...string) cmdResult {
	t.Helper()
	var out bytes.Buffer
	r := runCephRbd(t, ctx, c, stdin, &out, args...)
	r.stdout = out.String()
	return r
}

// cephRbdTo runs Ceph's rbd with args, its standard output into out.
func cephRbdTo(t *testing.T, ctx context.Context, c *radostest.Cluster, out io.Writer, args ...string) cmdResult {
	t.Helper()
	return runCephRbd(t, ctx, c, nil, out, args...)
}

func runCephRbd(t *testing.T, ctx context.Context, c *radostest.Cluster, stdin io.Reader, out io.Writer, args ...string) cmdResult {
	t.Helper()
	cmd := c.ToolCommand(ctx, "rbd", args...)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = out, &errb, stdin
	err := cmd.Run()
	r := cmdResult{stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("rbd %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// pureRbd runs purerbd rbd with args (and stdin, if not nil) in this
// process.
func pureRbd(ctx context.Context, c *radostest.Cluster, stdin io.Reader, args ...string) cmdResult {
	var out, errb bytes.Buffer
	err := execute(ctx, []string{"rbd"}, append([]string{"-c", c.Conf}, args...), stdin, &out, &errb)
	return cmdResult{stdout: out.String(), stderr: errb.String(), code: cli.Report(err, io.Discard)}
}

// sameAsRbd runs args through both and fails the test unless the exit
// codes and standard outputs agree; it returns purerbd's result.
func sameAsRbd(t *testing.T, ctx context.Context, c *radostest.Cluster, args ...string) cmdResult {
	t.Helper()
	want := cephRbd(t, ctx, c, nil, args...)
	got := pureRbd(ctx, c, nil, args...)
	if got.code != want.code || got.stdout != want.stdout {
		t.Errorf("rbd %s:\n purerbd exit %d, stdout:\n%s stderr: %s\n rbd exit %d, stdout:\n%s stderr: %s",
			strings.Join(args, " "), got.code, got.stdout, got.stderr, want.code, want.stdout, want.stderr)
	}
	return got
}

// qemuIO runs qemu-io commands on an image through librbd.
func qemuIO(t *testing.T, ctx context.Context, c *radostest.Cluster, image string, cmds ...string) {
	t.Helper()
	args := []string{"-f", "raw"}
	for _, cmd := range cmds {
		args = append(args, "-c", cmd)
	}
	args = append(args, "rbd:"+image+":conf="+c.Conf)
	if out, err := c.Program(ctx, "qemu-io", args...); err != nil {
		t.Fatalf("qemu-io %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// mustRbd runs Ceph's rbd and fails the test if it fails.
func mustRbd(t *testing.T, ctx context.Context, c *radostest.Cluster, args ...string) string {
	t.Helper()
	r := cephRbd(t, ctx, c, nil, args...)
	if r.code != 0 {
		t.Fatalf("rbd %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}
