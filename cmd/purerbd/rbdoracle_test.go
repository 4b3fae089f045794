package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados/radostest"
	"github.com/purerbd/purerbd/rbd/diffstream"
)

// Running one command line through Ceph's rbd or rados (the oracle) and
// through purerbd rbd or rados on the same cluster, for the verbs whose
// output and exit codes must agree.

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
	return runCephTool(t, ctx, c, "rbd", stdin, out, args...)
}

// runCephTool runs one of Ceph's tools (rbd, rados) with args, its
// standard output into out. Pacific's rbd now and then dies of a
// segmentation fault while it tears its CephContext down, after the work
// and before its buffered output is written; a command that only reads
// (readOnlyTool) is run again when that happens, as its second run
// answers the same question. Any other command that dies of a signal
// fails the test, as the oracle's answer is lost.
func runCephTool(t *testing.T, ctx context.Context, c *radostest.Cluster, tool string, stdin io.Reader, out io.Writer, args ...string) cmdResult {
	t.Helper()
	const tries = 3
	for try := 1; ; try++ {
		var outb, errb bytes.Buffer
		cmd := c.ToolCommand(ctx, tool, args...)
		cmd.Stdout, cmd.Stderr, cmd.Stdin = &outb, &errb, stdin
		if stdin == nil && !readOnlyTool(tool, args) {
			cmd.Stdout = out
		}
		err := cmd.Run()
		r := cmdResult{stderr: errb.String()}
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			r.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				if cmd.Stdout == out || try == tries {
					t.Fatalf("%s %s died of %v (the oracle's answer is lost): %s", tool, strings.Join(args, " "), ws.Signal(), firstLines(r.stderr, 12))
				}
				t.Logf("%s %s died of %v; running it again as it only reads: %s", tool, strings.Join(args, " "), ws.Signal(), firstLines(r.stderr, 3))
				continue
			}
		case err != nil:
			t.Fatalf("%s %s: %v", tool, strings.Join(args, " "), err)
		}
		if cmd.Stdout != out {
			if _, err := out.Write(outb.Bytes()); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
}

// readOnlyTool reports whether a command line of Ceph's rbd or rados
// only reads the cluster, so that running it twice answers the same as
// once.
func readOnlyTool(tool string, args []string) bool {
	var words []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-p" || a == "--pool" || a == "--format" || a == "--from-snap" || a == "--snap" || a == "--image" || a == "--namespace":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			words = append(words, a)
		}
	}
	if len(words) == 0 {
		return false
	}
	switch tool {
	case "rbd":
		switch words[0] {
		case "du", "disk-usage", "info", "ls", "list", "diff", "status", "children":
			return true
		case "snap", "trash", "group", "namespace", "mirror":
			// rbd snap ls, rbd group snap ls, rbd group image list...
			for _, w := range words[1:min(3, len(words))] {
				if w == "ls" || w == "list" {
					return true
				}
			}
		}
	case "rados":
		switch words[0] {
		case "lspools", "ls", "df", "stat", "listxattr", "getxattr", "listomapkeys", "listomapvals", "getomapval", "listsnaps":
			return true
		}
	}
	return false
}

// firstLines is s up to its nth line.
func firstLines(s string, n int) string {
	lines := strings.SplitAfterN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "")
}

// pureRbd runs purerbd rbd with args (and stdin, if not nil) in this
// process.
func pureRbd(ctx context.Context, c *radostest.Cluster, stdin io.Reader, args ...string) cmdResult {
	return pureTool(ctx, c, "rbd", stdin, args...)
}

// pureTool runs purerbd's verb group tool (rbd, rados) with args (and
// stdin, if not nil) in this process.
func pureTool(ctx context.Context, c *radostest.Cluster, tool string, stdin io.Reader, args ...string) cmdResult {
	var out, errb bytes.Buffer
	err := execute(ctx, []string{tool}, append([]string{"-c", c.Conf}, args...), stdin, &out, &errb)
	return cmdResult{stdout: out.String(), stderr: errb.String(), code: cli.Report(err, io.Discard)}
}

// sameAsRbd runs args through both and fails the test unless the exit
// codes and standard outputs agree; it returns purerbd's result.
func sameAsRbd(t *testing.T, ctx context.Context, c *radostest.Cluster, args ...string) cmdResult {
	t.Helper()
	return sameAsTool(t, ctx, c, "rbd", args...)
}

// sameAsRados is sameAsRbd for the rados tool.
func sameAsRados(t *testing.T, ctx context.Context, c *radostest.Cluster, args ...string) cmdResult {
	t.Helper()
	return sameAsTool(t, ctx, c, "rados", args...)
}

// sameAsTool runs args through Ceph's tool and purerbd's verb group of
// the same name and fails the test unless the exit codes and standard
// outputs agree; it returns purerbd's result.
func sameAsTool(t *testing.T, ctx context.Context, c *radostest.Cluster, tool string, args ...string) cmdResult {
	t.Helper()
	var out bytes.Buffer
	want := runCephTool(t, ctx, c, tool, nil, &out, args...)
	want.stdout = out.String()
	got := pureTool(ctx, c, tool, nil, args...)
	if got.code != want.code || got.stdout != want.stdout {
		t.Errorf("%s %s:\n purerbd exit %d, stdout:\n%s stderr: %s\n %s exit %d, stdout:\n%s stderr: %s",
			tool, strings.Join(args, " "), got.code, got.stdout, got.stderr, tool, want.code, want.stdout, want.stderr)
	}
	return got
}

// librbdIO writes to an image through Ceph's librbd, whatever the
// release: the commands (qemu-io's "write -P PATTERN OFF LEN" and
// "discard OFF LEN", sizes with K or M suffixes) become a diff stream
// that rbd import-diff applies (writes, and discards for its zero
// records).
func librbdIO(t *testing.T, ctx context.Context, c *radostest.Cluster, image string, cmds ...string) {
	t.Helper()
	size := mustRbd(t, ctx, c, "info", "--format", "json", image)
	var info struct {
		Size uint64 `json:"size"`
	}
	if err := json.Unmarshal([]byte(size), &info); err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	w, err := diffstream.NewWriter(&stream, diffstream.Header{Size: info.Size})
	if err != nil {
		t.Fatal(err)
	}
	num := func(s string) uint64 {
		mult := uint64(1)
		switch {
		case strings.HasSuffix(s, "K"):
			mult, s = 1<<10, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mult, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("librbdIO: %q: %v", s, err)
		}
		return n * mult
	}
	for _, cmd := range cmds {
		f := strings.Fields(cmd)
		switch {
		case len(f) == 5 && f[0] == "write" && f[1] == "-P":
			err = w.Write(num(f[3]), bytes.Repeat([]byte{byte(num(f[2]))}, int(num(f[4]))))
		case len(f) == 3 && f[0] == "discard":
			err = w.Zero(num(f[1]), num(f[2]))
		default:
			t.Fatalf("librbdIO: %q", cmd)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	if r := cephRbd(t, ctx, c, &stream, "import-diff", "--no-progress", "-", image); r.code != 0 {
		t.Fatalf("rbd import-diff into %s: %d %s", image, r.code, r.stderr)
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

// TestReadOnlyTool: the oracle runs again after a crash only for
// command lines that only read.
func TestReadOnlyTool(t *testing.T) {
	for _, tc := range []struct {
		tool string
		args []string
		want bool
	}{
		{"rbd", []string{"du", "--exact", "rbd/fd"}, true},
		{"rbd", []string{"du", "--from-snap", "s1", "rbd/fd@s2"}, true},
		{"rbd", []string{"snap", "ls", "rbd/fd"}, true},
		{"rbd", []string{"group", "snap", "ls", "rbd/g"}, true},
		{"rbd", []string{"--format", "json", "trash", "ls", "-p", "rbd"}, true},
		{"rbd", []string{"snap", "create", "rbd/fd@ls"}, false},
		{"rbd", []string{"group", "snap", "create", "rbd/g@list"}, false},
		{"rbd", []string{"rm", "rbd/ls"}, false},
		{"rbd", []string{"--pool", "du", "create", "x"}, false},
		{"rbd", []string{"export", "rbd/fd", "-"}, false},
		{"rbd", nil, false},
		{"rados", []string{"-p", "rbd", "ls"}, true},
		{"rados", []string{"-p", "ls", "rm", "x"}, false},
		{"rados", []string{"cppool", "a", "b"}, false},
	} {
		if got := readOnlyTool(tc.tool, tc.args); got != tc.want {
			t.Errorf("%s %q: %v, want %v", tc.tool, tc.args, got, tc.want)
		}
	}
}
