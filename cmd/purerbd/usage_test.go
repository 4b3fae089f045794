package main

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/internal/shorttier"
)

// commandPaths lists the words naming every command of the tree below c,
// c's own first.
func commandPaths(c *cli.Command, words []string) [][]string {
	out := [][]string{words}
	for _, s := range c.Subcommands() {
		out = append(out, commandPaths(s, append(append([]string(nil), words...), s.Name))...)
	}
	return out
}

// singleDash matches an option spelled with one dash and several
// letters, Go's flag package's style.
var singleDash = regexp.MustCompile(`(^|[\s,])-[A-Za-z][A-Za-z_-]+`)

// TestHelpEveryCommand: every command prints its usage on stdout and
// exits 0 for --help, -h (before or after its words) and, for a group,
// help, with its options spelled as Ceph's tools spell them: in this
// process for the whole tree, and through the built binary for a few.
func TestHelpEveryCommand(t *testing.T) {
	inProcess := func(_ []string, args ...string) (string, string, int) {
		var stdout, stderr strings.Builder
		code := run(context.Background(), args, &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	paths := commandPaths(newRoot(), nil)
	if len(paths) < 40 {
		t.Fatalf("the tree has %d commands", len(paths))
	}
	for _, p := range paths {
		checkHelp(t, inProcess, p)
	}
	binary := buildCLI(t)
	for _, p := range [][]string{nil, {"rbd", "create"}, {"rbd", "snap"}, {"nbd", "serve"}, {"rados"}} {
		checkHelp(t, binary, p)
	}
}

// checkHelp asks for the usage of the command the words p name, in each
// way a command line can.
func checkHelp(t *testing.T, run cliRun, p []string) {
	t.Helper()
	helps := [][]string{append(p, "--help"), append(p, "-h"), append([]string{"-h"}, p...)}
	if c := newRoot().Find(p...); len(c.Subcommands()) > 0 {
		helps = append(helps, append(p, "help"))
	}
	for _, args := range helps {
		stdout, stderr, code := run(nil, args...)
		want := "usage: " + strings.Join(append([]string{"purerbd"}, p...), " ") + " [options]"
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, want) {
			t.Errorf("purerbd %s: exit %d, stderr %q, stdout:\n%s\nwant exit 0 and a usage starting %q",
				strings.Join(args, " "), code, stderr, stdout, want)
			continue
		}
		for _, line := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(line, "  -") && singleDash.MatchString(strings.Fields(line)[0]) {
				t.Errorf("purerbd %s: single-dash option in %q", strings.Join(args, " "), line)
			}
		}
	}
}

// TestUsageErrorsExitAsCephTools: a mistake in a command line exits as
// the Ceph tool the verb mirrors does (rbd as the oracle: it finds these
// before connecting), 2 for purerbd's own verbs; the message names what
// is wrong on stderr and stdout stays empty.
func TestUsageErrorsExitAsCephTools(t *testing.T) {
	shorttier.Skip(t, "rbd")
	rbdPath, err := exec.LookPath("rbd")
	if err != nil {
		t.Fatalf("rbd is required for this test (Debian: ceph-common): %v", err)
	}
	run := buildCLI(t)
	for _, c := range []struct {
		args string
		msg  string // in purerbd's stderr
	}{
		{"create img", "--size is required"},
		{"create --size 1M", "missing IMAGE"},
		{"info", "missing IMAGE"},
		{"info a b", "too many arguments"},
		{"info img@", "bad image spec"},
		{"snap create img", "needs @snapshot"},
		{"snap", "missing command"},
		{"snap bogus img", `unknown command "bogus"`},
		{"bench img", "--io-type is required"},
		{"bench --io-type bogus img", "--io-type bogus"},
		{"create --size abc img", "--size abc"},
		{"create --image-feature bogus --size 1 img", "unknown image feature"},
		{"create --bogus x", "unknown option --bogus"},
		{"ls --format", "needs a value"},
		{"ls -l a b", "too many arguments"},
		{"image-meta get img", "missing KEY"},
		{"image-meta set img k", "missing VALUE"},
		{"lock", "missing command"},
		{"lock ls", "missing IMAGE"},
		{"bogusverb", `unknown command "bogusverb"`},
		{"resize img", "--size is required"},
		{"rename a", "missing DST"},
		{"clone a@s", "missing CHILD"},
		{"export", "missing IMAGE"},
		{"import", "missing PATH"},
		{"rm", "missing IMAGE"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, rbdPath, strings.Fields(c.args)...)
		cmd.Env = cleanEnv()
		err := cmd.Run()
		cancel()
		want := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			want = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("rbd %s: %v", c.args, err)
		}
		stdout, stderr, code := run(nil, append([]string{"rbd"}, strings.Fields(c.args)...)...)
		if code != want || want == 0 || stdout != "" || !strings.Contains(stderr, c.msg) {
			t.Errorf("purerbd rbd %s: exit %d, stdout %q, stderr %q; rbd exits %d, want %q on stderr",
				c.args, code, stdout, stderr, want, c.msg)
		}
	}
	for _, c := range []struct {
		args string
		code int
		msg  string
	}{
		{"", 2, "missing command"},
		{"bogus", 2, `unknown command "bogus"`},
		{"status --bogus", 2, "unknown option --bogus"},
		{"status --format xml", 2, "--format xml"},
		{"mon command", 2, "missing JSON"},
		{"nbd map a b", 2, "too many arguments"},
		{"crush test --show-mappings", 2, "--infn is required"},
		{"osdmap test-map-object map", 2, "missing NAME"},
		{"--connect-timeout", 2, "needs a value"},
		{"rados --bogus ls", 1, "unknown option --bogus"},
		{"rados put obj", 1, "missing INFILE"},
		{"rados", 1, "missing command"},
	} {
		stdout, stderr, code := run(nil, strings.Fields(c.args)...)
		if code != c.code || stdout != "" || !strings.Contains(stderr, c.msg) {
			t.Errorf("purerbd %s: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, stdout, stderr, c.code, c.msg)
		}
	}
}
